/* error.c: names and messages for the OSK_E* codes, from the X-macro table. */
#include "opskew.h"

const char *osk_strerror(int err) {
  switch (err) {
#define OSK__ERR_MSG(name, code, msg) \
  case (code):                        \
    return msg;
    OSK_ERRNO_MAP(OSK__ERR_MSG)
#undef OSK__ERR_MSG
  case 0:
    return "success";
  default:
    return "unknown error";
  }
}

const char *osk_err_name(int err) {
  switch (err) {
#define OSK__ERR_NAME(name, code, msg) \
  case (code):                         \
    return "OSK_E" #name;
    OSK_ERRNO_MAP(OSK__ERR_NAME)
#undef OSK__ERR_NAME
  case 0:
    return "OSK_OK";
  default:
    return "OSK_EUNKNOWN";
  }
}
