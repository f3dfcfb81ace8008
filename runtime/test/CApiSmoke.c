/*===- CApiSmoke.c - Compiled as C: proves mlart.h is pure C and usable ---===*/
#include "mlart/mlart.h"

#include <stdio.h>
#include <string.h>

/* Returns 0 on success, else the number of the failed check; writes the
 * message of the last error status seen into `msg`. */
int mlart_capi_smoke_c(char *msg, size_t cap) {
  mlart_device *dev = NULL;
  mlart_device *gpu = NULL;
  mlart_stream *stream = NULL;
  mlart_kv_cache *cache = NULL;
  mlart_block_manager *bm = NULL;
  mlart_status st;
  int rc = 0;
  uint16_t kv[2 * 512];
  uint16_t pe[2 * 64];
  int64_t slots[2] = {5, 4096}; /* 4096 is past the 4 x 16 slots */
  int64_t kv_sizes[2] = {2, 512}, pe_sizes[2] = {2, 64}, slot_sizes[1] = {2};
  mlart_kv_cache_desc desc;
  mlart_cache_update_args args;
  unsigned char row[1152];
  size_t i;

  msg[0] = '\0';
  if (mlart_device_create_cpu(&dev) != NULL)
    return 1;
  if (strcmp(mlart_device_kind_name(dev), "cpu") != 0) {
    mlart_device_destroy(dev);
    return 2;
  }
  /* Refused by either provider of the CUDA device. */
  st = mlart_device_create_cuda(-1, &gpu);
  if (mlart_status_get_code(st) != MLART_STATUS_INVALID_ARGUMENT || gpu)
    rc = 13;
  mlart_status_free(st);
  if (!rc && (st = mlart_stream_create(dev, &stream)) != NULL) {
    mlart_status_free(st);
    rc = 14;
  }
  if (rc) {
    mlart_device_destroy(dev);
    return rc;
  }

  desc.num_blocks = 4;
  desc.block_size = 16;
  desc.latent_rank = 512;
  desc.rope_dim = 64;
  desc.dtype = MLART_DTYPE_BF16;
  desc.layout = MLART_CACHE_PLAIN;
  if ((st = mlart_kv_cache_create(dev, &desc, 1.0f, &cache)) != NULL) {
    mlart_status_free(st);
    mlart_stream_destroy(stream);
    mlart_device_destroy(dev);
    return 3;
  }
  for (i = 0; i < 2 * 512; ++i)
    kv[i] = 0x3f80; /* bf16 1.0 */
  for (i = 0; i < 2 * 64; ++i)
    pe[i] = 0x4000; /* bf16 2.0 */
  memset(&args, 0, sizeof(args));
  args.kv_c = mlart_tensor_contiguous(kv, MLART_DTYPE_BF16, 2, kv_sizes);
  args.k_pe = mlart_tensor_contiguous(pe, MLART_DTYPE_BF16, 2, pe_sizes);
  args.slot_mapping =
      mlart_tensor_contiguous(slots, MLART_DTYPE_I64, 1, slot_sizes);
  args.cache = cache;

  st = mlart_cache_update(dev, &args, NULL);
  if (mlart_status_get_code(st) != MLART_STATUS_OUT_OF_RANGE) {
    rc = 4;
  } else {
    snprintf(msg, cap, "%s", mlart_status_message(st));
  }
  mlart_status_free(st);

  /* Nothing was written: slot 5 is still zero. */
  if (!rc && mlart_kv_cache_read_bytes(cache, 5 * 1152, row, sizeof row) != NULL)
    rc = 5;
  for (i = 0; !rc && i < sizeof row; ++i)
    if (row[i] != 0)
      rc = 6;

  slots[1] = -1;
  if (!rc && (st = mlart_cache_update(dev, &args, stream)) != NULL) {
    mlart_status_free(st);
    rc = 7;
  }
  if (!rc && mlart_stream_synchronize(stream) != NULL)
    rc = 15;
  if (!rc && mlart_kv_cache_read_bytes_on(cache, 5 * 1152, row, sizeof row,
                                          stream) != NULL)
    rc = 8;
  if (!rc && (row[0] != 0x80 || row[1] != 0x3f))
    rc = 9;

  /* Checked mode: the null block 0 is protected. */
  if (!rc && mlart_block_manager_create(4, 16, 1, &bm) != NULL)
    rc = 10;
  if (!rc) {
    mlart_block_manager_set_checked_mode(bm, 1);
    if ((st = mlart_kv_cache_set_guard(cache, bm)) != NULL) {
      mlart_status_free(st);
      rc = 11;
    }
  }
  if (!rc) {
    st = mlart_cache_update(dev, &args, NULL);
    if (mlart_status_get_code(st) != MLART_STATUS_PERMISSION_DENIED ||
        mlart_block_manager_refused_writes(bm) != 1)
      rc = 12;
    mlart_status_free(st);
  }

  mlart_block_manager_destroy(bm);
  mlart_kv_cache_destroy(cache);
  mlart_stream_destroy(stream);
  mlart_device_destroy(dev);
  return rc;
}
