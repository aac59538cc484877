/* json_check.h: a strict JSON syntax checker for the writer tests (RFC 8259
 * grammar; numbers, strings with escapes, nesting). Returns 1 if valid. */
#ifndef OPSKEW_JSON_CHECK_H
#define OPSKEW_JSON_CHECK_H
#include <string.h>

static const char *jc_value(const char *p, int depth);

static const char *jc_ws(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
  return p;
}

static const char *jc_string(const char *p) {
  if (*p++ != '"') return NULL;
  while (*p != '"') {
    unsigned char c = (unsigned char)*p;
    if (c == 0 || c < 0x20) return NULL;
    if (c == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++) {
          char h = p[i];
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return NULL;
        }
        p += 5;
      } else if (*p && strchr("\"\\/bfnrt", *p)) {
        p++;
      } else {
        return NULL;
      }
    } else {
      p++;
    }
  }
  return p + 1;
}

static const char *jc_number(const char *p) {
  if (*p == '-') p++;
  if (*p == '0') p++;
  else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
  else return NULL;
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') p++;
  }
  return p;
}

static const char *jc_value(const char *p, int depth) {
  if (depth > 64) return NULL;
  p = jc_ws(p);
  if (*p == '{' || *p == '[') { /* members "key": value, or elements */
    char close = *p == '{' ? '}' : ']';
    p = jc_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = jc_string(jc_ws(p));
        if (!p) return NULL;
        p = jc_ws(p);
        if (*p++ != ':') return NULL;
      }
      p = jc_value(p, depth + 1);
      if (!p) return NULL;
      p = jc_ws(p);
      if (*p == ',') {
        p++;
        continue;
      }
      return *p == close ? p + 1 : NULL;
    }
  }
  if (*p == '"') return jc_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  return jc_number(p);
}

static int json_valid(const char *text) {
  const char *p = jc_value(text, 0);
  return p && *jc_ws(p) == '\0';
}
#endif
