// Work-group reductions: subgroup operations, then the gl_NumSubgroups partial results
// through shared memory, so they work for any subgroup size from 4 to 128 (lavapipe 8,
// Apple 32, NVIDIA 32, AMD 32/64). Every invocation of the group must call them.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

// Room for 1024 invocations in subgroups of 4 or more.
shared float kiln_partials[256];

float group_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) kiln_partials[gl_SubgroupID] = v;
  barrier();
  float r = 0.0;
  for (uint s = 0u; s < gl_NumSubgroups; ++s) r += kiln_partials[s];
  barrier();
  return r;
}

float group_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) kiln_partials[gl_SubgroupID] = v;
  barrier();
  float r = kiln_partials[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) r = max(r, kiln_partials[s]);
  barrier();
  return r;
}

// The row a work group handles, over a 2D grid of groups.
uint group_row() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
