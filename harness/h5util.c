#include "harness/h5util.h"

void eq_h5_close(hid_t *id)
{
    if (*id < 0) return;
    switch (H5Iget_type(*id)) {
    case H5I_FILE: H5Fclose(*id); break;
    case H5I_GROUP: H5Gclose(*id); break;
    case H5I_DATATYPE: H5Tclose(*id); break;
    case H5I_DATASPACE: H5Sclose(*id); break;
    case H5I_DATASET: H5Dclose(*id); break;
    case H5I_ATTR: H5Aclose(*id); break;
    case H5I_GENPROP_LST: H5Pclose(*id); break;
    default: break;
    }
    *id = H5I_INVALID_HID;
}

/* HDF5 checks every field against the precision and the precision against the size, so the
 * fields are moved while the type is still 32 bits wide, and only then are precision and size
 * cut to 16. */
hid_t eq_h5_make_bf16_type(void)
{
    hid_t type = H5Tcopy(H5T_IEEE_F32LE);
    if (type < 0) return type;
    if (H5Tset_fields(type, 15, 7, 8, 0, 7) < 0 || H5Tset_offset(type, 0) < 0 || H5Tset_precision(type, 16) < 0 ||
        H5Tset_size(type, 2) < 0 || H5Tset_ebias(type, 127) < 0)
        eq_h5_close(&type);
    return type;
}

int eq_h5_is_bf16_type(hid_t type)
{
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2 || H5Tget_order(type) != H5T_ORDER_LE) return 0;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return 0;
    return spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 && H5Tget_ebias(type) == 127;
}
