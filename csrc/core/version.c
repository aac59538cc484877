/* version.c: the engine's version, from meson.build's project() (the one
 * place it is written), through the opskew_version.h that meson generates
 * into the build root. Public headers carry no version macros, so a source
 * file compiled outside meson (fuzz/run.sh, bench/bench_reader.py) needs
 * none; what needs the version at run time calls osk_version(). */
#include "opskew.h"
#include "opskew_version.h"

const char *osk_version(void) { return OSK_VERSION_STRING; }
