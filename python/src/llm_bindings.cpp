// kiln.llm's compiled half: a loaded model (forward, generate, tokenizer calls). The
// Python-facing classes are in python/kiln/llm.py.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/llm.h"
#include "kiln/llm_synthetic.h"

namespace kiln::python {

namespace {

std::vector<int32_t> to_ids(const py::handle& obj) {
  std::vector<int32_t> ids;
  for (auto item : py::reinterpret_borrow<py::iterable>(obj)) {
    if (!PyIndex_Check(item.ptr())) throw py::type_error("token ids must be ints");
    // Out of int32 is out of every vocabulary: the model names the id and its vocabulary.
    const int64_t id = to_int64_clamped(item);
    if (id < INT32_MIN || id > INT32_MAX) {
      throw py::value_error("token id " + describe_int(item) + " is out of range (expected an int32 "
                            "id within the model's vocabulary)");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

py::dict info_dict(const llm::ModelInfo& i) {
  py::dict d;
  d["arch"] = i.arch;
  d["model_type"] = i.model_type;
  d["num_layers"] = i.num_layers;
  d["num_attention_layers"] = i.num_attention_layers;
  d["hidden_size"] = i.hidden_size;
  d["vocab_size"] = i.vocab_size;
  d["num_experts"] = i.num_experts;
  d["experts_per_token"] = i.experts_per_token;
  d["weight_format"] = std::string(llm::weight_format_name(i.weight_format));
  d["weight_dtypes"] = i.weight_dtypes;
  d["cache_dtype"] = std::string(dtype_name(i.cache_dtype));
  d["max_context"] = i.max_context;
  d["kv_cache_bytes"] = i.kv_cache_bytes;
  d["fixed_state_bytes"] = i.fixed_state_bytes;
  d["parameter_count"] = i.parameter_count;
  d["resident_weight_bytes"] = i.resident_weight_bytes;
  d["load_seconds"] = i.load_seconds;
  d["device"] = i.device.str();
  if (i.fp8_quantization.has_value()) {
    py::dict q;
    q["tensors"] = i.fp8_quantization->tensors;
    q["max_relative_error"] = i.fp8_quantization->max_relative_error;
    q["rms_relative_error"] = i.fp8_quantization->rms_relative_error;
    d["fp8_quantization"] = q;
  }
  return d;
}

}  // namespace

void bind_llm(py::module_& m) {
  m.def("_make_synthetic_model", [](const std::string& out_dir, const std::string& arch, const std::string& preset,
                                    std::optional<int64_t> layers, bool fp8, uint64_t seed) {
    llm::SyntheticModelOptions o;
    o.out_dir = out_dir;
    o.arch = arch;
    o.preset = preset;
    o.num_layers = layers;
    o.fp8 = fp8;
    o.seed = seed;
    py::gil_scoped_release release;
    llm::make_synthetic_model(o);
  }, py::arg("out_dir"), py::arg("arch"), py::arg("preset"), py::arg("layers"), py::arg("fp8"), py::arg("seed"));
  py::class_<llm::Model, std::unique_ptr<llm::Model>>(m, "_LlmModel")
      .def_static("load", [](const std::string& dir, const std::string& dtype, int64_t max_context,
                             const py::object& cache_dtype, const py::object& device) {
        llm::LoadOptions o;
        o.weights = llm::weight_format_from_name(dtype);
        o.max_context = max_context;
        if (!cache_dtype.is_none()) o.cache_dtype = to_dtype(cache_dtype);
        if (!device.is_none()) {
          o.device = py::isinstance<py::str>(device) ? device_from_string(device.cast<std::string>())
                                                     : device.cast<Device>();
        }
        py::gil_scoped_release release;
        return llm::Model::load(dir, o);
      }, py::arg("path"), py::arg("dtype"), py::arg("max_context"), py::arg("cache_dtype"),
         py::arg("device") = py::none())
      .def("forward", [](llm::Model& model, const py::object& ids, bool all_logits) {
        const std::vector<int32_t> tokens = to_ids(ids);
        py::gil_scoped_release release;
        return model.forward(tokens, all_logits);
      }, py::arg("token_ids"), py::arg("all_logits"))
      // Every call that takes the model's lock lets go of the GIL first: a generate on
      // another thread holds the lock and takes the GIL for its on_text callback.
      .def("reset", &llm::Model::reset, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("position", [](const llm::Model& model) {
        py::gil_scoped_release release;
        return model.position();
      })
      .def_property_readonly("info", [](const llm::Model& model) { return info_dict(model.info()); })
      .def_property_readonly("eos_ids", &llm::Model::eos_ids)
      .def("encode", [](const llm::Model& model, const std::string& text, bool add_special_tokens) {
        return model.encode(text, add_special_tokens);
      }, py::arg("text"), py::arg("add_special_tokens"))
      .def("decode", [](const llm::Model& model, const py::object& ids, bool skip_special_tokens) {
        return model.decode(to_ids(ids), skip_special_tokens);
      }, py::arg("ids"), py::arg("skip_special_tokens"))
      .def("chat_prompt", &llm::Model::chat_prompt, py::arg("user"), py::arg("system"),
           py::arg("enable_thinking") = true)
      .def("apply_chat_template", [](const llm::Model& model, const std::string& messages_json,
                                     bool add_generation_prompt, const std::string& kwargs_json,
                                     const std::optional<std::string>& chat_template) {
        std::optional<std::string_view> override_template;
        if (chat_template) override_template = *chat_template;
        py::gil_scoped_release release;
        return model.apply_chat_template(messages_json, add_generation_prompt, kwargs_json, override_template);
      }, py::arg("messages_json"), py::arg("add_generation_prompt"), py::arg("kwargs_json"), py::arg("chat_template"))
      .def_property_readonly("has_chat_template", &llm::Model::has_chat_template)
      .def("generate", [](llm::Model& model, const std::string& prompt, int64_t max_new_tokens, double temperature,
                          int64_t top_k, double top_p, double min_p, double repetition_penalty, uint64_t seed,
                          bool chat, const std::string& system, const py::object& on_text, bool enable_thinking) {
        llm::GenerateOptions o;
        o.max_new_tokens = max_new_tokens;
        o.sampling = {temperature, top_k, top_p, min_p, repetition_penalty, seed};
        o.chat = chat;
        o.system = system;
        o.enable_thinking = enable_thinking;
        if (!on_text.is_none()) {
          o.on_text = [&on_text](std::string_view text) {
            py::gil_scoped_acquire acquire;
            const py::object keep_going = on_text(py::str(text.data(), text.size()));
            return keep_going.is_none() || keep_going.cast<bool>();
          };
        }
        llm::GenerateResult r;
        {
          py::gil_scoped_release release;
          r = llm::generate(model, prompt, o);
        }
        py::dict d;
        d["text"] = r.text;
        d["tokens"] = r.tokens;
        d["prompt_tokens"] = r.prompt_tokens;
        d["generated_tokens"] = r.generated_tokens;
        d["prefill_seconds"] = r.prefill_seconds;
        d["decode_seconds"] = r.decode_seconds;
        d["decode_bytes"] = r.decode_bytes;
        d["stop_reason"] = r.stop_reason;
        return d;
      }, py::arg("prompt"), py::arg("max_new_tokens"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
         py::arg("min_p"), py::arg("repetition_penalty"), py::arg("seed"), py::arg("chat"), py::arg("system"),
         py::arg("on_text"), py::arg("enable_thinking") = true);
}

}  // namespace kiln::python
