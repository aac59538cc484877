/* header_alone.h: the functions of the header_alone_* objects, one per
 * public header (header_alone.c, compiled once per header by meson, as C
 * and as C++), for test_headers.c and test_headers.cpp: headers_alone()
 * is the number of headers that compiled alone, HEADERS_ALONE of them. */
#ifndef OPSKEW_TEST_HEADER_ALONE_H
#define OPSKEW_TEST_HEADER_ALONE_H

int header_alone_core(void);
int header_alone_reader(void);
int header_alone_correct(void);
int header_alone_trace(void);
int header_alone_job(void);
int header_alone_collector(void);

#define HEADERS_ALONE 6

static inline int headers_alone(void) {
  return header_alone_core() + header_alone_reader() + header_alone_correct() +
         header_alone_trace() + header_alone_job() + header_alone_collector();
}

#endif
