#include "harness/base/atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

eq_status eq_atomic_begin(eq_atomic_file *af, const char *final_path, int open_stdio)
{
    memset(af, 0, sizeof *af);
    if (strlen(final_path) >= sizeof af->final_path - 32)
        return EQ_FAIL(EQ_ERR_USAGE, "output path too long: %s", final_path);
    strcpy(af->final_path, final_path);
    const char *slash = strrchr(final_path, '/');
    int dir_len = slash ? (int)(slash - final_path + 1) : 0;
    /* An unpredictable name, created here (O_EXCL: never a file or symlink planted before). */
    snprintf(af->temp_path, sizeof af->temp_path, "%.*s.%s.tmp.XXXXXX", dir_len, final_path, final_path + dir_len);
    int fd = mkstemp(af->temp_path);
    if (fd < 0) {
        int err = errno;
        af->temp_path[0] = '\0';
        return EQ_FAIL(EQ_ERR_IO, "cannot write %s: %s", af->final_path, strerror(err));
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* as fopen would have made it */
    if (!open_stdio) {
        close(fd);
        return EQ_OK;
    }
    if ((af->fp = fdopen(fd, "w")) == NULL) {
        int err = errno;
        close(fd);
        eq_atomic_abort(af);
        return EQ_FAIL(EQ_ERR_IO, "cannot write %s: %s", af->final_path, strerror(err));
    }
    return EQ_OK;
}

eq_status eq_atomic_commit(eq_atomic_file *af)
{
    if (af->fp != NULL) {
        int failed = ferror(af->fp) || fflush(af->fp) != 0;
        int err = errno;
        failed |= fclose(af->fp) != 0;
        if (failed && err == 0) err = errno;
        af->fp = NULL;
        if (failed) {
            eq_atomic_abort(af);
            return EQ_FAIL(EQ_ERR_IO, "cannot write %s: %s", af->final_path, err ? strerror(err) : "write error");
        }
    }
    if (rename(af->temp_path, af->final_path) != 0) {
        int err = errno;
        eq_atomic_abort(af);
        return EQ_FAIL(EQ_ERR_IO, "cannot move output into place at %s: %s", af->final_path, strerror(err));
    }
    af->temp_path[0] = '\0';
    return EQ_OK;
}

void eq_atomic_abort(eq_atomic_file *af)
{
    if (af->fp != NULL) {
        fclose(af->fp);
        af->fp = NULL;
    }
    if (af->temp_path[0] != '\0') {
        unlink(af->temp_path);
        af->temp_path[0] = '\0';
    }
}

eq_status eq_ensure_dir(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return EQ_OK;
        return EQ_FAIL(EQ_ERR_USAGE, "--out %s exists and is not a folder", dir);
    }
    if (mkdir(dir, 0777) != 0) return EQ_FAIL(EQ_ERR_IO, "cannot create folder %s: %s", dir, strerror(errno));
    return EQ_OK;
}
