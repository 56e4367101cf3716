/* A CPU library's <math.h> (tapegpu/backends/emu/build.py precompiles it once per cache
   directory and set of flags). */
#include "emu_math.h"
