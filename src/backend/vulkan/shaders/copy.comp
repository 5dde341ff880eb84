// copy.glsl with the strided geometry in push constants: up to 6 merged dims.
#version 450
#include "copy.glsl"
