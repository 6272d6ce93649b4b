/* Many simulations of one MuJoCo model on a thread pool of our own, over mj_step.
 *
 * Each simulation is a state row [time, qpos, qvel, act, qacc_warmstart]
 * (mj_getState with ROW_SPEC).  A call loads each row into a scratch mjData of
 * its thread (one per thread, so memory is O(threads), not O(simulations)),
 * runs mj_step nstep times (optionally then mj_rnePostConstraint, as
 * gymnasium's MujocoEnv does), copies the requested mjData fields out and saves
 * the row back.  Per simulation it reports whether MuJoCo reset the data for a
 * bad qpos/qvel/qacc/ctrl (MuJoCo's own handling of an unstable simulation).
 *
 * Built and loaded by bridge.py with ctypes (which releases the GIL).
 */
#include <mujoco/mujoco.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROW_SPEC (mjSTATE_FULLPHYSICS | mjSTATE_WARMSTART)
#define MAX_FIELD_ID 17

/* The mjData arrays a call may copy out, by index (bridge.py's FIELDS). */
static mjtNum* field_ptr(mjData* d, int id) {
  switch (id) {
    case 0: return d->xpos;
    case 1: return d->xipos;
    case 2: return d->xquat;
    case 3: return d->cfrc_ext;
    case 4: return d->cfrc_int;
    case 5: return d->site_xpos;
    case 6: return d->cinert;
    case 7: return d->cvel;
    case 8: return d->cacc;
    case 9: return d->qfrc_actuator;
    case 10: return d->qfrc_constraint;
    case 11: return d->ten_length;
    case 12: return d->ten_velocity;
    case 13: return d->subtree_com;
    case 14: return d->sensordata;
    case 15: return d->actuator_force;
    case 16: return d->qacc;
    case 17: return d->ctrl;
    default: return NULL;
  }
}

typedef struct {
  const mjModel* m;
  int nthread;       /* scratch mjData allocated */
  mjData** data;
  pthread_mutex_t lock;  /* one call at a time uses the scratch data */
} Engine;

void* gv_create(const mjModel* m, int nthread) {
  Engine* e = (Engine*)calloc(1, sizeof(Engine));
  if (!e) return NULL;
  e->m = m;
  e->nthread = nthread;
  pthread_mutex_init(&e->lock, NULL);
  e->data = (mjData**)calloc(nthread, sizeof(mjData*)); /* made on first use */
  return e;
}

void gv_free(void* handle) {
  Engine* e = (Engine*)handle;
  if (!e) return;
  for (int i = 0; i < e->nthread; i++) {
    if (e->data[i]) mj_deleteData(e->data[i]);
  }
  free(e->data);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

int gv_row_size(const mjModel* m) { return mj_stateSize(m, ROW_SPEC); }

typedef struct {
  Engine* e;
  int n, nstep, rne_post, forward_only;
  const double* rows_in;
  const double* ctrl;
  const uint8_t* mask;
  double* rows_out;
  double* derived;
  uint8_t* warned;
  int nfield;
  const int* field_ids;
  const int64_t* field_sizes;
  int64_t dsize;       /* doubles of derived per simulation */
  int64_t next;        /* next simulation to take (atomic) */
} Job;

typedef struct {
  Job* job;
  int tid;
} Worker;

static void run_one(Job* j, mjData* d, int i) {
  const mjModel* m = j->e->m;
  int K = mj_stateSize(m, ROW_SPEC);
  double* out = j->derived + (int64_t)i * j->dsize;
  if (j->forward_only && !j->mask[i]) {
    memset(out, 0, sizeof(double) * j->dsize);
    return;
  }
  if (j->forward_only) {
    /* gymnasium's reset: mj_resetData (ctrl and the fields mj_forward does not compute,
       such as cfrc_ext, are 0), the state, mj_forward */
    mj_resetData(m, d);
    mj_setState(m, d, j->rows_in + (int64_t)i * K, ROW_SPEC);
    mj_forward(m, d);
  } else {
    mj_setState(m, d, j->rows_in + (int64_t)i * K, ROW_SPEC);
    for (int w = 0; w < mjNWARNING; w++) d->warning[w].number = 0;
    memcpy(d->ctrl, j->ctrl + (int64_t)i * m->nu, sizeof(double) * m->nu);
    for (int s = 0; s < j->nstep; s++) mj_step(m, d);
    if (j->rne_post) mj_rnePostConstraint(m, d);
    mj_getState(m, d, j->rows_out + (int64_t)i * K, ROW_SPEC);
    j->warned[i] = (d->warning[mjWARN_BADQPOS].number | d->warning[mjWARN_BADQVEL].number |
                    d->warning[mjWARN_BADQACC].number | d->warning[mjWARN_BADCTRL].number) != 0;
  }
  for (int f = 0; f < j->nfield; f++) {
    int64_t sz = j->field_sizes[f];
    memcpy(out, field_ptr(d, j->field_ids[f]), sizeof(double) * sz);
    out += sz;
  }
}

static void* work(void* arg) {
  Worker* w = (Worker*)arg;
  Job* j = w->job;
  mjData* d = j->e->data[w->tid];
  for (;;) {
    int64_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (i >= j->n) break;
    run_one(j, d, (int)i);
  }
  return NULL;
}

static int run(Job* j, int nthread) {
  for (int f = 0; f < j->nfield; f++) {
    if (j->field_ids[f] < 0 || j->field_ids[f] > MAX_FIELD_ID) return -1;
  }
  if (nthread > j->e->nthread) nthread = j->e->nthread;
  if (nthread > j->n) nthread = j->n;
  if (nthread < 1) nthread = 1;
  if (nthread > 256) nthread = 256;
  j->next = 0;
  pthread_mutex_lock(&j->e->lock);
  for (int t = 0; t < nthread; t++) {
    if (!j->e->data[t]) j->e->data[t] = mj_makeData(j->e->m);
    if (!j->e->data[t]) {
      pthread_mutex_unlock(&j->e->lock);
      return -2;
    }
  }
  pthread_t threads[256];
  Worker workers[256];
  int started = 0;
  for (int t = 1; t < nthread; t++) {
    workers[t].job = j;
    workers[t].tid = t;
    if (pthread_create(&threads[t], NULL, work, &workers[t]) != 0) break;
    started = t;
  }
  workers[0].job = j;
  workers[0].tid = 0;
  work(&workers[0]);
  for (int t = 1; t <= started; t++) pthread_join(threads[t], NULL);
  pthread_mutex_unlock(&j->e->lock);
  return 0;
}

/* rows_in (n, K), ctrl (n, nu) -> rows_out (n, K), derived (n, D), warned (n,). */
int gv_step(void* handle, int n, const double* rows_in, const double* ctrl, int nstep,
            int rne_post, double* rows_out, double* derived, uint8_t* warned, int nfield,
            const int* field_ids, const int64_t* field_sizes, int nthread) {
  Job j = {0};
  j.e = (Engine*)handle;
  j.n = n;
  j.nstep = nstep;
  j.rne_post = rne_post;
  j.rows_in = rows_in;
  j.ctrl = ctrl;
  j.rows_out = rows_out;
  j.derived = derived;
  j.warned = warned;
  j.nfield = nfield;
  j.field_ids = field_ids;
  j.field_sizes = field_sizes;
  for (int f = 0; f < nfield; f++) j.dsize += field_sizes[f];
  return run(&j, nthread);
}

/* derived (n, D) of a gymnasium reset to rows_in (n, K) where mask, zeros elsewhere. */
int gv_forward(void* handle, int n, const double* rows_in, const uint8_t* mask, double* derived,
               int nfield, const int* field_ids, const int64_t* field_sizes, int nthread) {
  Job j = {0};
  j.e = (Engine*)handle;
  j.n = n;
  j.forward_only = 1;
  j.rows_in = rows_in;
  j.mask = mask;
  j.derived = derived;
  j.nfield = nfield;
  j.field_ids = field_ids;
  j.field_sizes = field_sizes;
  for (int f = 0; f < nfield; f++) j.dsize += field_sizes[f];
  return run(&j, nthread);
}
