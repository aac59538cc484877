// header_alone.c compiled as C++ (see there).
#include "header_alone.c"
