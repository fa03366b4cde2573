/* NCCL's placement of a ring all-reduce's elements (see nccl_layout.h), followed from NCCL 2.2x:
 *   channel parts   src/enqueue.cc, scheduleCollTasksToPlan, the "not task->isCollnet" branch
 *                   (cells, cellsLo/Mid/Hi, countLo/Mid/Hi), for one all-reduce alone in its plan
 *                   on cfg.channels channels (channelId 0, currentTraffic 0);
 *   chunk per part  src/enqueue.cc, calcCollChunking (stepSize = buffSizes[proto] / NCCL_STEPS,
 *                   chunkSteps, the LL and LL128 cuts, the grain alignment), read back on the
 *                   device by ncclCollCbdPart (src/include/device.h) as chunkGrains * grain / size;
 *   loops, chunks   src/device/all_reduce.h, runRing: loopCount = nranks * chunkCount, a short last
 *                   loop's chunkCount = alignUp(divUp(remCount, nranks), 16 / sizeof(T)), chunk k
 *                   at chunk * chunkCount of the loop, step 0 on ring index r sends chunk r - 1.
 * The buffer sizes are NCCL's defaults (NCCL_BUFFSIZE etc. unset); the ring is ranks 0..n-1. */
#include "reductions/nccl_layout.h"

#include <string.h>

#define NCCL_STEPS 8                                 /* src/include/device.h */
#define ALLREDUCE_CHUNKSTEPS (NCCL_STEPS / 2)        /* src/include/collectives.h */
#define MIN_TRAFFIC_PER_CHANNEL ((size_t)32 << 10)   /* scheduleCollTasksToPlan: 32K traffic as minimal */
#define ALLREDUCE_TRAFFIC_PER_BYTE 2                 /* ncclFuncTrafficPerByte(ncclFuncAllReduce) */

const char *eq_nccl_proto_name(eq_nccl_proto p)
{
    switch (p) {
    case EQ_NCCL_SIMPLE: return "simple";
    case EQ_NCCL_LL: return "ll";
    case EQ_NCCL_LL128: return "ll128";
    }
    return "?";
}

eq_status eq_nccl_proto_parse(const char *name, eq_nccl_proto *out)
{
    for (int p = 0; p < EQ_NCCL_PROTO_COUNT; p++) {
        if (strcmp(name, eq_nccl_proto_name((eq_nccl_proto)p)) == 0) {
            *out = (eq_nccl_proto)p;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown NCCL protocol '%s' (known: simple, ll, ll128)", name);
}

static size_t div_up(size_t x, size_t y) { return (x + y - 1) / y; }

/* ncclProtoGrainSize (src/include/device.h): LL 16 bytes; LL128 WARP_SIZE (32) *
 * NCCL_LL128_SHMEM_ELEMS_PER_THREAD (8) / NCCL_LL128_LINEELEMS (16) * NCCL_LL128_DATAELEMS (15) *
 * 8 = 1920 bytes; Simple 512 bytes. */
static size_t grain_bytes(eq_nccl_proto p) { return p == EQ_NCCL_LL ? 16 : p == EQ_NCCL_LL128 ? 1920 : 512; }

/* calcCollChunking for ring: stepSize * chunkSteps, LL halved, LL128 cut to data lines, then
 * aligned down to the grain. Default buffers (src/include/device.h, DEFAULT_*_BUFFSIZE): Simple
 * 4 MiB (step 512 KiB, 4 steps: 2 MiB); LL 8 lines * 512 threads * 8 steps * 16 B = 512 KiB (step
 * 64 KiB, halved: 32 KiB); LL128 120 elems * 640 threads * 8 steps * 8 B = 4915200 B (step 614400,
 * * 15 / 16: 576000 B). Ring chunks do not depend on the buffer's size. */
static size_t chunk_bytes(eq_nccl_proto p)
{
    size_t chunk;
    switch (p) {
    case EQ_NCCL_LL: chunk = (size_t)8 * 512 * NCCL_STEPS * 16 / NCCL_STEPS / 2; break;
    case EQ_NCCL_LL128: chunk = (size_t)120 * 640 * NCCL_STEPS * 8 / NCCL_STEPS / 16 * 15; break;
    default: chunk = ((size_t)4 << 20) / NCCL_STEPS * ALLREDUCE_CHUNKSTEPS; break;
    }
    return chunk / grain_bytes(p) * grain_bytes(p);
}

/* The channel parts of scheduleCollTasksToPlan: parts[0] = countLo, then n_mid parts of countMid,
 * then countHi if not 0. Returns the number of parts. */
static int channel_parts(eq_nccl_config cfg, size_t elem_size, size_t count, size_t parts[])
{
    size_t traffic_per_byte = ALLREDUCE_TRAFFIC_PER_BYTE * (cfg.proto == EQ_NCCL_LL ? 4 : 1);
    size_t task_traffic = count * elem_size * ALLREDUCE_TRAFFIC_PER_BYTE; /* task->trafficBytes */
    size_t traffic = task_traffic > MIN_TRAFFIC_PER_CHANNEL ? task_traffic : MIN_TRAFFIC_PER_CHANNEL;
    size_t traffic_per_channel = div_up(traffic / (size_t)cfg.channels, 16) * 16;
    size_t cell_size = div_up(div_up(MIN_TRAFFIC_PER_CHANNEL, traffic_per_byte), 16) * 16;
    size_t elems_per_cell = cell_size / elem_size, cells = div_up(count * elem_size, cell_size);
    size_t traffic_per_cell = cell_size * traffic_per_byte;
    size_t cells_per_channel = div_up(traffic_per_channel, traffic_per_cell);
    if (cells_per_channel > cells) cells_per_channel = cells;
    size_t cells_lo = cells; /* on the last channel everything goes to "lo" */
    if (cfg.channels > 1 && div_up(traffic_per_channel, traffic_per_cell) < cells)
        cells_lo = div_up(traffic_per_channel, traffic_per_cell);
    long n_mid = (long)((cells - cells_lo) / cells_per_channel);
    size_t cells_hi = (cells - cells_lo) % cells_per_channel;
    long used = 1 + n_mid + (cells_hi != 0 ? 1 : 0);
    if (cfg.channels < used) { /* overflowed the available channels */
        n_mid = cfg.channels - 2;
        cells_per_channel = (cells - cells_lo) / (size_t)(n_mid + 1);
        cells_hi = cells_per_channel + (cells - cells_lo) % (size_t)(n_mid + 1);
    }
    if (cells_hi == 0 && n_mid != 0) {
        cells_hi = cells_per_channel;
        n_mid -= 1;
    }
    size_t padding = cells * elems_per_cell - count; /* taken off the last part */
    int n_parts = 0;
    parts[n_parts++] = cells_lo * elems_per_cell;
    for (long m = 0; m < n_mid; m++) parts[n_parts++] = cells_per_channel * elems_per_cell;
    if (cells_hi != 0) parts[n_parts++] = cells_hi * elems_per_cell;
    parts[n_parts - 1] -= padding;
    return n_parts;
}

void eq_nccl_ring_loop(eq_nccl_config cfg, size_t elem_size, int n, size_t count, size_t at, eq_nccl_loop *out)
{
    size_t parts[EQ_NCCL_MAX_CHANNELS + 1];
    if (cfg.channels < 1) cfg.channels = 1;
    int n_parts = channel_parts(cfg, elem_size, count, parts);
    size_t part_begin = 0;
    int channel = 0;
    while (channel < n_parts - 1 && at >= part_begin + parts[channel]) part_begin += parts[channel++];
    size_t part_count = parts[channel];
    size_t chunk_count = chunk_bytes(cfg.proto) / grain_bytes(cfg.proto) * (grain_bytes(cfg.proto) / elem_size);
    size_t loop_count = (size_t)n * chunk_count, loop = (at - part_begin) / loop_count;
    size_t loop_begin = part_begin + loop * loop_count, remaining = part_begin + part_count - loop_begin;
    if (remaining < loop_count) { /* the last loop: chunks shrink, aligned to 16 bytes */
        size_t align = 16 / elem_size;
        chunk_count = div_up(div_up(remaining, (size_t)n), align) * align;
    }
    out->begin = loop_begin;
    out->len = remaining < loop_count ? remaining : loop_count;
    out->chunk_count = chunk_count;
    out->channel = channel;
    out->loop = loop;
}

void eq_nccl_ring_piece(eq_nccl_config cfg, size_t elem_size, int n, size_t count, size_t at, eq_nccl_piece *piece)
{
    eq_nccl_loop loop;
    eq_nccl_ring_loop(cfg, elem_size, n, count, at, &loop);
    size_t chunk = (at - loop.begin) / loop.chunk_count, chunk_begin = chunk * loop.chunk_count;
    piece->begin = loop.begin + chunk_begin;
    piece->len = loop.len - chunk_begin < loop.chunk_count ? loop.len - chunk_begin : loop.chunk_count;
    piece->channel = loop.channel;
    piece->loop = loop.loop;
    piece->chunk = (int)chunk;
}
