/* eq_data_home: $EQUIV_HOME, the installed share folder, or the source tree (harness/driver/data_home.h). */
#define _DEFAULT_SOURCE /* readlink */
#include "harness/driver/data_home.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "equiv_config.h"

/* <dir of the executable>/EQUIV_BIN_TO_DATA when it holds cases/; false otherwise (also when
 * /proc is missing: the build tree's source root is then the answer). */
static int installed_home(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL) return 0;
    *slash = '\0';
    char cases[PATH_MAX + 64];
    const char *to_data = EQUIV_BIN_TO_DATA; /* relative to the binary's folder, or absolute */
    int w = to_data[0] == '/' ? snprintf(buf, len, "%s", to_data) : snprintf(buf, len, "%s/%s", exe, to_data);
    if (w < 0 || (size_t)w >= len) return 0;
    snprintf(cases, sizeof cases, "%s/cases", buf);
    struct stat sb;
    return stat(cases, &sb) == 0 && S_ISDIR(sb.st_mode);
}

const char *eq_data_home(char *buf, size_t len)
{
    const char *home = getenv("EQUIV_HOME");
    if (home != NULL && home[0] != '\0') snprintf(buf, len, "%s", home);
    else if (!installed_home(buf, len)) snprintf(buf, len, "%s", EQUIV_SOURCE_ROOT);
    return buf;
}
