/* Where equiv's data lives: case files (cases/NAME.ini), the tolerance table
 * (golden/tolerances.ini) and the golden envelopes (golden/envelopes/NAME.json).
 *
 * In order: $EQUIV_HOME when set; else the installed data directory beside the executable
 * (<prefix>/bin/equiv finds <prefix>/share/equiv, so an install moved elsewhere as a whole, or
 * installed under DESTDIR, still finds its data); else the source tree the binary was built from. */
#ifndef EQUIV_HARNESS_DRIVER_DATA_HOME_H
#define EQUIV_HARNESS_DRIVER_DATA_HOME_H

#include <stddef.h>

/* Writes the data folder into buf (always terminated) and returns buf. */
const char *eq_data_home(char *buf, size_t len);

#endif
