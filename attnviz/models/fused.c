/* The scan's fused CPU kernel (attnviz/models/fused.py builds it with the machine's C compiler and loads it).

   For each row of k scores s of a block of queries, hidden keys marked by `hidden` (the lowest float):
   1. the row's `top` largest scores and their keys, largest first;
   2. with m the largest and s' = max(s - m, floor): e = exp(s') (0 for a hidden key) written to exps, the row's
      total = sum e, moment = sum e s' and each chunk's sum of e (`chunk` keys a chunk). exps may be scores: each e
      is written over the s it is made from, after pass 1 has read the row.
   3. where asked (lines), with a = e / total the row's weights: each key's sum of a over the block's rows (the
      verticals) and each offset's, i - j for query i and key j (the slashes), into the caller's sums.
   A row (k floats) stays in the cache between the passes, so the scores are read from memory once and the
   exponentials written once; torch's separate kernels read or write every score seven times. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The search for a row's strongest keys cuts its values into groups of 16 and keeps each group's largest: group g
   holds values 256·(g / 16) + g % 16 + 16·v, v = 0 … 15 (those below n), so that the maxima of 16 groups are one
   vector's lanes, each the largest of 16 vectors read in turn. */
enum { LANES = 16, SPAN = LANES * LANES };

/* Puts value v, of key j, among best (largest first) and its key among keys, when fewer than `top` are held or it
   beats the least held; a tie keeps the earlier one first. */
static inline void put(float v, int32_t j, int64_t *held, int64_t top, float *best, int32_t *keys) {
    if (*held == top && !(v > best[top - 1]))
        return;
    int64_t i = *held < top ? (*held)++ : top - 1;
    for (; i > 0 && best[i - 1] < v; i--) {
        best[i] = best[i - 1];
        keys[i] = keys[i - 1];
    }
    best[i] = v;
    keys[i] = j;
}

/* maxima (LANES·⌈n / SPAN⌉) of values (n, a multiple of LANES): each group's largest. */
static void group_maxima(const float *values, int64_t n, float *maxima) {
    for (int64_t first = 0; first < n; first += SPAN) {
        const int64_t vectors = (n - first) / LANES < LANES ? (n - first) / LANES : LANES;
        float most[LANES];
        for (int b = 0; b < LANES; b++)
            most[b] = values[first + b];
        for (int64_t v = 1; v < vectors; v++)
#pragma omp simd
            for (int b = 0; b < LANES; b++)
                most[b] = values[first + v * LANES + b] > most[b] ? values[first + v * LANES + b] : most[b];
        for (int b = 0; b < LANES; b++)
            maxima[first / LANES + b] = most[b];
    }
}

/* The `top` largest of values (n of them) within the groups named by within (count of them, best first), into best
   and keys (largest first); a value below `least` is never among them. Returns how many are held. */
static int64_t largest_within(const float *values, int64_t n, const int32_t *within, int64_t count, int64_t top,
                              float least, float *best, int32_t *keys) {
    int64_t held = 0;
    for (int64_t i = 0; i < count; i++) {
        const int64_t g = within[i];
        for (int64_t j = (g / LANES) * SPAN + g % LANES; j < n && j < (g / LANES + 1) * SPAN; j += LANES)
            if (values[j] >= least)
                put(values[j], (int32_t)j, &held, top, best, keys);
    }
    return held;
}

/* The room strongest() takes: each group's maximum, each group of groups' maximum, and the chosen maxima and
   their two lists of groups (32-bit each), top apiece. */
static int64_t room_size(int64_t k, int64_t top) {
    const int64_t groups = LANES * ((k + SPAN - 1) / SPAN);
    return groups + LANES * ((groups + SPAN - 1) / SPAN) + 3 * top;
}

/* A row's `top` strongest keys (k >= top, k a multiple of LANES), largest first. A key among them lies in one of the
   `top` groups with the largest maxima, and such a group in one of the `top` groups of groups with the largest
   maxima; so only those are searched, best first, and only values at least the least of the `top` maxima chosen
   (there are `top` values that large). Whatever the order of the scores (a head that reads the latest keys has them
   rising), few values are put among the best. room: room_size(k, top) floats. */
static void strongest(const float *s, int64_t k, int64_t top, float *best, int32_t *keys, float *room) {
    const int64_t groups = LANES * ((k + SPAN - 1) / SPAN), supers = LANES * ((groups + SPAN - 1) / SPAN);
    float *maxima = room, *super_maxima = maxima + groups, *chosen_best = super_maxima + supers;
    int32_t *chosen = (int32_t *)(chosen_best + top), *groups_chosen = chosen + top;
    group_maxima(s, k, maxima);
    group_maxima(maxima, groups, super_maxima);
    int64_t held = 0;
    for (int64_t u = 0; u < supers; u++)
        put(super_maxima[u], (int32_t)u, &held, top, chosen_best, chosen);
    float least = held == top ? chosen_best[top - 1] : -3.402823466e38f; /* else the lowest float */
    held = largest_within(maxima, groups, chosen, held, top, least, chosen_best, groups_chosen);
    least = held == top ? chosen_best[top - 1] : -3.402823466e38f;
    largest_within(s, k, groups_chosen, held, top, least, best, keys);
}

/* A thread's verticals and slashes of the rows of one head, until its rows pass to another head: adding each row's
   weights into the caller's sums would make the threads wait on each other for every row. Slot t of `slash` holds
   offset start + r - 1 - t (row i's key b goes to slot b + r - 1 - i). */
typedef struct {
    int64_t head;
    float *vertical, *slash;
} Lines;

/* Adds a thread's sums of head `lines->head` into verticals (heads, width >= k) and slashes (heads, 2n - 1), offset
   d at d + n - 1, and clears them. */
static void flush(Lines *lines, int64_t k, int64_t r, int64_t start, int64_t n, int64_t width, double *verticals,
                  double *slashes) {
    if (lines->head < 0)
        return;
    double *vertical = verticals + lines->head * width, *slash = slashes + lines->head * (2 * n - 1);
#pragma omp critical(attnviz_lines)
    {
        for (int64_t b = 0; b < k; b++)
            vertical[b] += lines->vertical[b];
        for (int64_t t = 0; t < k + r; t++) {
            const int64_t at = start + r - 1 - t + n - 1;
            if (at >= 0 && at < 2 * n - 1)
                slash[at] += lines->slash[t];
        }
    }
    for (int64_t b = 0; b < k; b++)
        lines->vertical[b] = 0.0f;
    for (int64_t t = 0; t < k + r; t++)
        lines->slash[t] = 0.0f;
    lines->head = -1;
}

/* count rows of k scores (k a multiple of chunk and of LANES, top <= k), shared among `threads` OpenMP threads: the
   process's OpenMP runtime, torch's own where torch has loaded it, so the kernel runs on the threads torch's kernels
   run on (threads of its own would meet torch's, still spinning after its last kernel, on the same cores). The rows
   are r queries of each head in turn, at positions start ... start + r - 1 of n pieces; verticals (count / r, width)
   and slashes (count / r, 2n - 1), float64, gain the block's weights where both are given (else NULL), a learned sink's
   logit per head (sinks, or NULL) counted in each row's total as the scan counts it. Returns 0, or 1 where memory ran
   out. */
int attnviz_block(const float *scores, int64_t count, int64_t k, int64_t chunk, int64_t top, float floor_,
                  float hidden, float *exps, float *best, int32_t *keys, float *total, float *moment, float *sums,
                  int64_t r, int64_t start, int64_t n, int64_t width, double *verticals, double *slashes,
                  const float *sinks, int threads) {
    int failed = 0;
    const int lined = verticals != 0 && slashes != 0;
#pragma omp parallel num_threads(threads < 1 ? 1 : threads) reduction(| : failed)
    {
        float *room = malloc(sizeof(float) * room_size(k, top));
        Lines lines = {-1, 0, 0};
        if (lined) {
            lines.vertical = calloc((size_t)(2 * k + r), sizeof(float));
            lines.slash = lines.vertical + k;
        }
        failed = room == 0 || (lined && lines.vertical == 0);
#pragma omp for schedule(static)
        for (int64_t row = 0; row < count; row++) {
            if (failed)
                continue;
            const float *s = scores + row * k;
            float *e = exps + row * k, *row_sums = sums + row * (k / chunk), *row_best = best + row * top;
            strongest(s, k, top, row_best, keys + row * top, room);
            const float m = row_best[0];
            double row_total = 0.0, row_moment = 0.0;
            for (int64_t a = 0; a < k; a += chunk) {
                float t = 0.0f, u = 0.0f;
#pragma omp simd reduction(+ : t, u)
                for (int64_t b = a; b < a + chunk; b++) {
                    float x = s[b] - m;
                    x = x < floor_ ? floor_ : x;
                    float y = expf(x);
                    y = s[b] <= hidden ? 0.0f : y;
                    e[b] = y;
                    t += y;
                    u += y * x;
                }
                row_sums[a / chunk] = t;
                row_total += t;
                row_moment += u;
            }
            total[row] = (float)row_total;
            moment[row] = (float)row_moment;
            if (lined) {
                if (lines.head != row / r)
                    flush(&lines, k, r, start, n, width, verticals, slashes);
                lines.head = row / r;
                const double sunk = sinks != 0 ? exp((double)sinks[row / r] - (double)m) : 0.0;
                const float inverse = (float)(1.0 / (row_total + sunk));
                float *vertical = lines.vertical, *slash = lines.slash + (r - 1 - row % r);
#pragma omp simd
                for (int64_t b = 0; b < k; b++) {
                    const float a = e[b] * inverse;
                    vertical[b] += a;
                    slash[b] += a;
                }
            }
        }
        if (lined && !failed)
            flush(&lines, k, r, start, n, width, verticals, slashes);
        free(room);
        free(lines.vertical);
    }
    return failed;
}
