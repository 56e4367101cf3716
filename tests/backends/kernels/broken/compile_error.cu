// Not valid C++: the emulator must report g++'s message with this file's line.
extern "C" __global__ void typo(float *y) {
  y[threadIdx.x] = undeclared_name;
}
