/* <math.h> for the emulator's kernels and the CPU's generated kernels: C++'s, with every
   overload (sin(float) is sinf, as in CUDA), without the C++17 special functions
   (std::riemann_zeta & co., no kernel calls them): libstdc++ reads them with <cmath>, two
   thirds of the header, and every generated library pays for reading it. */
#ifndef TAPEGPU_EMU_MATH_H
#define TAPEGPU_EMU_MATH_H
#if defined(__cplusplus) && defined(__has_include)
#if __has_include(<bits/c++config.h>)
#include <bits/c++config.h>
#undef _GLIBCXX_USE_STD_SPEC_FUNCS
#endif
#endif
#include <math.h>
#endif
