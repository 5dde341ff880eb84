// copy.glsl with the strided geometry in a storage buffer (binding 2): views
// whose dims do not merge to 6 or fewer (strided.glsl).
#version 450
#define KILN_STRIDED_GEOMETRY_BINDING 2
#include "copy.glsl"
