/* Runs a compiled tessel artifact through the C API (docs/deploy.md).
 *
 *   c_app MODEL.tsl OUT_DIR [NAME=FILE ...]
 *
 * Each input is read from FILE (raw little-endian bytes of the input's dtype,
 * row-major, at the model's fixed shape); inputs not named are zeros. Each
 * output is written to OUT_DIR/output_<i>.bin (raw bytes) and its shape
 * printed. Exits 1 with one line on stderr on any error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessel/tessel.h>

static int fail_status(const char* what, tessel_status s) {
  fprintf(stderr, "error: %s: %s: %s\n", what, tessel_status_name(s), tessel_last_error());
  return 1;
}

/* Reads exactly n bytes of `path` into buf; 0 on success. */
static int read_exact(const char* path, void* buf, size_t n) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  size_t got = n ? fread(buf, 1, n, f) : 0;
  int extra = fgetc(f) != EOF;
  fclose(f);
  return got == n && !extra ? 0 : -1;
}

/* The file named for input `name` among argv's NAME=FILE pairs, or NULL. */
static const char* file_for(const char* name, int argc, char** argv) {
  size_t len = strlen(name);
  for (int i = 3; i < argc; ++i)
    if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return argv[i] + len + 1;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.tsl OUT_DIR [NAME=FILE ...]\n", argv[0]);
    return 2;
  }
  tessel_model* m = NULL;
  tessel_status s = tessel_load(argv[1], NULL, &m);
  if (s != TESSEL_OK) return fail_status("load", s);

  size_t ni = tessel_num_inputs(m), no = tessel_num_outputs(m);
  tessel_tensor* in = calloc(ni ? ni : 1, sizeof *in);
  tessel_tensor* out = calloc(no ? no : 1, sizeof *out);
  int64_t(*out_shapes)[TESSEL_MAX_RANK] = calloc(no ? no : 1, sizeof *out_shapes);
  int rc = 0;
  for (size_t i = 0; i < ni && rc == 0; ++i) {
    tessel_value_info info;
    tessel_input_info(m, i, &info);
    size_t n = tessel_dtype_size(info.dtype);
    for (int64_t d = 0; d < info.rank; ++d) {
      if (info.dims[d] < 0) {
        fprintf(stderr, "error: input '%s' has symbolic dim '%s': compile with --dim\n", info.name, info.dim_names[d]);
        rc = 1;
      }
      n *= (size_t)(info.dims[d] < 0 ? 0 : info.dims[d]);
    }
    in[i] = (tessel_tensor){info.dtype, (size_t)(info.rank < 0 ? 0 : info.rank), (int64_t*)info.dims, calloc(n ? n : 1, 1), n};
    const char* path = file_for(info.name, argc, argv);
    if (rc == 0 && path && read_exact(path, in[i].data, n) != 0) {
      fprintf(stderr, "error: %s: cannot read %zu bytes for input '%s'\n", path, n, info.name);
      rc = 1;
    }
  }
  for (size_t i = 0; i < no && rc == 0; ++i) {
    tessel_value_info info;
    size_t rank = 0;
    tessel_output_info(m, i, &info);
    s = tessel_output_shape(m, in, ni, i, out_shapes[i], &rank);
    if (s != TESSEL_OK) {
      rc = fail_status("output shape", s);
      break;
    }
    size_t n = tessel_dtype_size(info.dtype);
    for (size_t d = 0; d < rank; ++d) n *= (size_t)out_shapes[i][d];
    out[i] = (tessel_tensor){info.dtype, rank, out_shapes[i], malloc(n ? n : 1), n};
  }
  if (rc == 0) {
    s = tessel_run(m, in, ni, out, no);
    if (s != TESSEL_OK) rc = fail_status("run", s);
  }
  for (size_t i = 0; i < no && rc == 0; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%zu.bin", argv[2], i);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(out[i].data, 1, out[i].nbytes, f) != out[i].nbytes) {
      fprintf(stderr, "error: cannot write %s\n", path);
      rc = 1;
    }
    if (f) fclose(f);
    printf("output %zu: dtype %d shape [", i, (int)out[i].dtype);
    for (size_t d = 0; d < out[i].rank; ++d) printf("%s%lld", d ? ", " : "", (long long)out[i].shape[d]);
    printf("] -> %s\n", path);
  }
  for (size_t i = 0; i < ni; ++i) free(in[i].data);
  for (size_t i = 0; i < no; ++i) free(out[i].data);
  free(in);
  free(out);
  free(out_shapes);
  tessel_free(m);
  return rc;
}
