/* The collector through the ITT ABI, driven the way ittapi's static part
 * drives it: dlopen the library, call __itt_api_init with a global whose api
 * list has our four functions and others, then call through the pointers.
 * Includes a handle and a domain allocated by the "static part". */
#include "collector_testutil.h"

#include <pthread.h>

typedef struct dom {
  volatile int flags;
  const char *nameA;
  void *nameW;
  int extra1;
  void *extra2;
  struct dom *next;
} dom_t;
typedef struct sh {
  const char *strA;
  void *strW;
  int extra1;
  void *extra2;
  struct sh *next;
} sh_t;
typedef struct {
  unsigned long long d1, d2, d3;
} id_t3;
typedef struct {
  const char *name;
  void **func_ptr;
  void *init_func;
  void *null_func;
  int group;
} api_info_t;
typedef struct {
  unsigned char magic[8];
  unsigned long vmaj, vmin, vbuild;
  volatile long api_initialized, mutex_initialized, atomic_counter;
  pthread_mutex_t mutex;
  void *lib;
  void *error_handler;
  const char **dll_path_ptr;
  api_info_t *api_list_ptr;
  void *next;
  void *thread_list;
  dom_t *domain_list;
  sh_t *string_list;
  char tail[64];
} global_t;

typedef dom_t *(*domain_create_t)(const char *);
typedef sh_t *(*shc_t)(const char *);
typedef void (*begin_t)(const dom_t *, id_t3, id_t3, sh_t *);
typedef void (*end_t)(const dom_t *);

static void null_fn(void) {}
static void *p_domain, *p_shc, *p_begin, *p_end, *p_other;

int main(int argc, char **argv) {
  CHECK(argc == 2);
  collector_t c = collector_open(argv[1]);
  void (*api_init)(global_t *, int);
  *(void **)&api_init = collector_sym(&c, "__itt_api_init");
  CHECK(strcmp(c.instrument(), "itt") == 0);

  void *nf;
  void (*nfp)(void) = null_fn;
  memcpy(&nf, &nfp, sizeof nf);
  p_other = (void *)&p_other; /* must become null_func */
  api_info_t list[] = {
      {"__itt_domain_create", &p_domain, NULL, NULL, 1},
      {"__itt_string_handle_create", &p_shc, NULL, NULL, 1},
      {"__itt_frame_begin_v3", &p_other, NULL, nf, 1},
      {"__itt_task_begin", &p_begin, NULL, nf, 1},
      {"__itt_task_end", &p_end, NULL, nf, 1},
      {NULL, NULL, NULL, NULL, 0},
  };
  static global_t g = {.magic = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30}, .vmaj = 3};
  g.api_list_ptr = list;

  /* A wrong magic: nothing is bound. */
  CHECK(c.bound() == 0);
  static global_t bad;
  bad.api_list_ptr = list;
  api_init(&bad, 0);
  CHECK(p_begin == NULL && c.bound() == -1);

  api_init(&g, 0);
  CHECK(p_domain && p_shc && p_begin && p_end);
  CHECK(p_other == nf);

  domain_create_t domain_create;
  shc_t shc;
  begin_t begin;
  end_t end;
  memcpy(&domain_create, &p_domain, sizeof p_domain);
  memcpy(&shc, &p_shc, sizeof p_shc);
  memcpy(&begin, &p_begin, sizeof p_begin);
  memcpy(&end, &p_end, sizeof p_end);

  /* The static part's own domain and handle, made before we loaded. */
  dom_t torch_dom = {.flags = 1, .nameA = "PyTorch"};
  sh_t early = {.strA = "aten::empty"};
  dom_t *mine = domain_create("oneDNN");
  CHECK(mine && mine->flags && !strcmp(mine->nameA, "oneDNN") && domain_create("oneDNN") == mine);

  CHECK(c.start() == 0);
  id_t3 null_id = {0, 0, 0};
  begin(&torch_dom, null_id, null_id, &early);
  for (int i = 0; i < 1000; i++) {
    sh_t *h = shc("aten::add");
    CHECK(h && !strcmp(h->strA, "aten::add"));
    begin(&torch_dom, null_id, null_id, h);
    end(&torch_dom);
  }
  end(&torch_dom);
  begin(mine, null_id, null_id, shc("dnnl::conv"));
  end(mine);
  begin(&torch_dom, null_id, null_id, NULL);
  end(&torch_dom);
  osk_trace_snapshot_t *s;
  size_t n;
  osk_trace_event_t *ev = collector_stop(&c, &s, &n);
  CHECK(n == 1003 && c.calib(s)->valid && c.calib(s)->w_ns > 0);
  size_t adds = 0;
  for (size_t i = 0; i < n; i++) {
    const char *nm = c.name(s, ev[i].name);
    if (!strcmp(nm, "aten::add")) {
      adds++;
      CHECK(ev[i].depth == 1 && !strcmp(c.category(s, ev[i].category), "cpu_op"));
    } else if (!strcmp(nm, "aten::empty")) {
      CHECK(ev[i].depth == 0 && i == 1000); /* ends after its children */
    } else if (!strcmp(nm, "dnnl::conv")) {
      CHECK(!strcmp(c.category(s, ev[i].category), "oneDNN"));
    } else {
      CHECK(!strcmp(nm, "<unnamed>"));
    }
  }
  CHECK(adds == 1000);
  free(ev);
  c.free(s);
  printf("ok: itt collector\n");
  return 0;
}
