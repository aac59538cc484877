/* One public header alone in a translation unit, first, and twice: it must
 * bring everything it needs, and its guard must hold. meson compiles this
 * file once per header (as C, and as C++ through header_alone.cpp), naming
 * the header in OSK_TEST_HEADER and the function below in OSK_TEST_FN. */
#include OSK_TEST_HEADER
#include OSK_TEST_HEADER

int OSK_TEST_FN(void);
int OSK_TEST_FN(void) { return 1; }
