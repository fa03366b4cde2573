/* Fixtures of the reading-at-scale test and benchmark (read_scale_test.c, read_bench.c): files as
 * another writer makes them (h5py's defaults: HDF5's original group format, no creation order),
 * written with the HDF5 library directly, since equiv's own dumps are written one way only.
 *
 *   write_scalars_file  one file of n scalar fp32 datasets "t000000", "t000001", ... (role
 *                       activation) in the root: about 400 bytes a dataset, the densest a valid
 *                       file gets, so the most datasets per MB a reader's limits must allow
 *   write_rank_files    a run of n ranks (dp n, tp 1), a file per rank "rank00000.h5", ...: x [2]
 *                       split over dp (rank r holds r, r + 0.5), w [3] replicated, a scalar loss */
#ifndef EQUIV_HARNESS_READ_SCALE_FIXTURES_H
#define EQUIV_HARNESS_READ_SCALE_FIXTURES_H

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

static inline int fixture_int_attr(hid_t obj, const char *name, long long value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, H5T_NATIVE_LLONG, &value) >= 0;
    H5Aclose(attr);
    H5Sclose(space);
    return ok;
}

static inline int fixture_text_attr(hid_t obj, const char *name, const char *text)
{
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, strlen(text) + 1);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, type, text) >= 0;
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    return ok;
}

/* A dataset of n fp32 values (n 0: a scalar) with its role and, unless NULL, its shard. */
static inline int fixture_dataset(hid_t file, const char *name, const float *values, hsize_t n, const char *role,
                                  const char *shard)
{
    hid_t space = n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    hid_t dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int ok = dset >= 0 && H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0 &&
             fixture_text_attr(dset, "role", role) && (shard == NULL || fixture_text_attr(dset, "shard", shard));
    H5Dclose(dset);
    H5Sclose(space);
    return ok;
}

/* 1 when written; the value of dataset i is i / 2. */
static inline int write_scalars_file(const char *path, int n)
{
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int ok = file >= 0 && fixture_int_attr(file, "dp", 1) && fixture_int_attr(file, "tp", 1);
    for (int i = 0; ok && i < n; i++) {
        char name[16];
        float value = 0.5f * (float)i;
        snprintf(name, sizeof name, "t%06d", i);
        ok = fixture_dataset(file, name, &value, 0, "activation", NULL);
    }
    return H5Fclose(file) >= 0 && ok;
}

/* 1 when written; dir exists. */
static inline int write_rank_files(const char *dir, int n)
{
    int ok = 1;
    for (int r = 0; ok && r < n; r++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/rank%05d.h5", dir, r) >= sizeof path) return 0;
        hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        const float x[2] = {(float)r, (float)r + 0.5f}, w[3] = {1.0f, 2.0f, 3.0f}, loss = 1.5f;
        ok = file >= 0 && fixture_int_attr(file, "dp", n) && fixture_int_attr(file, "tp", 1) &&
             fixture_int_attr(file, "world_size", n) && fixture_int_attr(file, "rank", r) &&
             fixture_int_attr(file, "dp_rank", r) && fixture_int_attr(file, "tp_rank", 0) &&
             fixture_dataset(file, "x", x, 2, "activation", "dp:0") && fixture_dataset(file, "w", w, 3, "param", NULL) &&
             fixture_dataset(file, "loss", &loss, 0, "loss", NULL);
        ok = H5Fclose(file) >= 0 && ok;
    }
    return ok;
}

#endif
