/* The scan's fused CPU kernel (attnviz/models/fused.py builds it with the machine's C compiler and loads it).

   For each row of k scores s of a block of queries, hidden keys marked by `hidden` (the lowest float):
   1. the row's `top` largest scores and their keys, largest first;
   2. with m the largest and s' = max(s - m, floor): e = exp(s') (0 for a hidden key) written to exps, the row's
      total = sum e, moment = sum e s' and each chunk's sum of e (`chunk` keys a chunk).
   A row (k floats) stays in the cache between the two passes, so the scores are read from memory once and the
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

/* count rows of k scores (k a multiple of chunk and of LANES, top <= k), shared among `threads` OpenMP threads: the
   process's OpenMP runtime, torch's own where torch has loaded it, so the kernel runs on the threads torch's kernels
   run on (threads of its own would meet torch's, still spinning after its last kernel, on the same cores). Returns
   0, or 1 where memory for the search ran out. */
int attnviz_block(const float *scores, int64_t count, int64_t k, int64_t chunk, int64_t top, float floor_,
                  float hidden, float *exps, float *best, int32_t *keys, float *total, float *moment, float *sums,
                  int threads) {
    int failed = 0;
#pragma omp parallel num_threads(threads < 1 ? 1 : threads) reduction(| : failed)
    {
        float *room = malloc(sizeof(float) * room_size(k, top));
        failed = room == 0;
#pragma omp for schedule(static)
        for (int64_t row = 0; row < count; row++) {
            if (room == 0)
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
        }
        free(room);
    }
    return failed;
}
