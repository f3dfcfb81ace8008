/* Embedding check of the installed runtime as a shared library: C only,
 * linked against libmlart.so (MLA::mlart_shared). Checks the version the
 * header says against the library's, then loads the artifact that
 * mla-consumer compiled (argv[1]), runs it on the CPU device and compares
 * it with an RMSNorm computed here. */
#include "mlart/mlart.h"

#include <math.h>
#include <stdio.h>

static int failed(mlart_status st, const char *what) {
  if (st == NULL)
    return 0;
  fprintf(stderr, "%s: %s\n", what, mlart_status_message(st));
  mlart_status_free(st);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mla-runtime-consumer ARTIFACT\n");
    return 2;
  }
  if (mlart_version() != MLART_VERSION) {
    fprintf(stderr, "libmlart %s, header %s\n", mlart_version_string(),
            MLART_VERSION_STRING);
    return 1;
  }
  mlart_device *device = NULL;
  mlart_artifact *artifact = NULL;
  mlart_executor *executor = NULL;
  float x[2][8], w[8], out[2][8];
  for (int i = 0; i < 8; ++i) {
    w[i] = 0.5f + 0.125f * (float)i;
    x[0][i] = (float)i - 3.5f;
    x[1][i] = 0.25f * (float)(i * i) - 1.0f;
  }
  const int64_t rows[2] = {2, 8}, cols[1] = {8};
  const mlart_tensor hidden =
      mlart_tensor_contiguous(x, MLART_DTYPE_F32, 2, rows);
  const mlart_tensor weight =
      mlart_tensor_contiguous(w, MLART_DTYPE_F32, 1, cols);
  const mlart_tensor result =
      mlart_tensor_contiguous(out, MLART_DTYPE_F32, 2, rows);
  if (failed(mlart_device_create_cpu(&device), "device") ||
      failed(mlart_artifact_load_file(argv[1], &artifact), "load") ||
      failed(mlart_executor_create(device, artifact, &executor), "executor") ||
      failed(mlart_executor_bind(executor, "hidden_states", &hidden),
             "bind hidden_states") ||
      failed(mlart_executor_bind(executor, "w", &weight), "bind w") ||
      failed(mlart_executor_bind(executor, "result0", &result),
             "bind result0") ||
      failed(mlart_executor_run(executor, NULL), "run"))
    return 1;
  double worst = 0.0;
  for (int r = 0; r < 2; ++r) {
    double sum = 0.0;
    for (int i = 0; i < 8; ++i)
      sum += (double)x[r][i] * x[r][i];
    const double inv = 1.0 / sqrt(sum / 8.0 + 1e-6);
    for (int i = 0; i < 8; ++i) {
      const double want = x[r][i] * inv * w[i];
      const double err = fabs(out[r][i] - want);
      worst = err > worst ? err : worst;
    }
  }
  mlart_executor_free(executor);
  mlart_artifact_free(artifact);
  mlart_device_destroy(device);
  printf("libmlart %s: rms_norm through the C API, max error %.1e\n",
         mlart_version_string(), worst);
  return worst < 1e-5 ? 0 : 1;
}
