// The compiled measurement bench: a Verilator model of a component with an output stream,
// run cycle by cycle with no Python in the loop (squeezenic_hw/sim/stream_run.py builds it
// and reads what it writes; run_amaranth there is the same bench on Amaranth's simulator).
//
// Cycle t (from 0): the snapshot ports are read at the start of cycle `warmup` (the first
// measured one); the stream's ready is low with probability `backpressure`; `close` is
// high from the cycle after the one that ended with `done` high; the stream's valid and
// payload and the event ports are sampled before the clock edge. In the measured cycles
// (t >= warmup) a beat (valid and ready) counts once and its bytes as the ones of the
// payload's keep field; an event port high counts once, with its first and last cycle.
// Without a done port the run ends after warmup + cycles cycles; with one, once `quiet`
// cycles in a row since close rose had no beat, or fails (exit 3) after warmup + cycles.
// The snapshot ports are read again at the end.
//
// argv: configuration file, output file. Configuration (text): warmup, cycles, quiet,
// backpressure, seed, progress seconds, then the words (u32, least significant first) of
// each static input port in STATIC_WORDS order. Output (text): "cycles T", "beats B",
// "bytes Y", "closed_at C" (-1: never), "seconds S", one "event COUNT FIRST LAST" per
// event port (-1: none), "before W..." (when cycle `warmup` was reached) and "after W...".
// While it runs it prints "progress T" on stdout about every `progress seconds`.
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "Vtop.h"
#include "run_ports.h"
#include "verilated.h"

static void put_words(FILE *out, const char *name, const std::vector<uint32_t> &w) {
  fprintf(out, "%s", name);
  for (uint32_t v : w) fprintf(out, " %" PRIu32, v);
  fprintf(out, "\n");
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: model CONFIG OUT\n"); return 2; }
  FILE *in = fopen(argv[1], "r");
  if (!in) { perror(argv[1]); return 2; }
  unsigned long long warmup, cycles, quiet, seed;
  double backpressure, progress_s;
  if (fscanf(in, "%llu %llu %llu %lf %llu %lf", &warmup, &cycles, &quiet, &backpressure,
             &seed, &progress_s) != 6) {
    fprintf(stderr, "bad configuration file\n"); return 2;
  }
  VerilatedContext ctx;
  Vtop top(&ctx);
  for (int k = 0; k < N_STATIC; k++) {
    std::vector<uint32_t> w(STATIC_WORDS[k]);
    for (auto &v : w) {
      if (fscanf(in, "%" SCNu32, &v) != 1) { fprintf(stderr, "short configuration file\n"); return 2; }
    }
    set_static(top, k, w.data());
  }
  fclose(in);

  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  // no reset pulse: the registers start at their initial values, as in Amaranth's simulator
  top.clk = 0;
  top.eval();

  std::vector<uint32_t> before(SNAPSHOT_WORDS), after(SNAPSHOT_WORDS);
  std::vector<unsigned long long> ev_count(N_EVENTS + 1, 0);
  std::vector<long long> ev_first(N_EVENTS + 1, -1), ev_last(N_EVENTS + 1, -1);
  bool took_before = false, closing = false;
  unsigned long long t = 0, beats = 0, bytes = 0, still = 0;
  long long closed_at = -1;
  const unsigned long long end = warmup + cycles;
  auto start = std::chrono::steady_clock::now();
  auto shown = start;
  for (;;) {
    if (t == warmup) { read_snapshots(top, before.data()); took_before = true; }
    const bool ready = !(backpressure > 0 && uniform(rng) < backpressure);
    top.STREAM_READY = ready;
#ifdef CLOSE_PORT
    top.CLOSE_PORT = closing;
#endif
    top.clk = 0;
    top.eval();
    const bool beat = ready && top.STREAM_VALID;
    if (t >= warmup) {
      if (beat) { beats++; bytes += keep_bytes(top); }
      for (int k = 0; k < N_EVENTS; k++) {
        if (read_event(top, k)) {
          if (ev_count[k]++ == 0) ev_first[k] = (long long)t;
          ev_last[k] = (long long)t;
        }
      }
    }
    top.clk = 1;
    top.eval();
    t++;
#ifdef DONE_PORT
    if (closing) {
      still = beat ? 0 : still + 1;
      if (still >= quiet) break;
    } else if (top.DONE_PORT) {
      closing = true;
      closed_at = (long long)t;
    }
    if (t >= end) {
      fprintf(stderr, "timeout: not done after %llu cycles\n", t);
      return 3;
    }
#else
    (void)quiet; (void)still;
    if (t >= end) break;
#endif
    if ((t & 4095) == 0 && progress_s > 0) {
      auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - shown).count() >= progress_s) {
        printf("progress %llu\n", t);
        fflush(stdout);
        shown = now;
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  read_snapshots(top, after.data());

  FILE *out = fopen(argv[2], "w");
  if (!out) { perror(argv[2]); return 2; }
  fprintf(out, "cycles %llu\nbeats %llu\nbytes %llu\nclosed_at %lld\nseconds %.6f\n", t, beats,
          bytes, closed_at, seconds);
  for (int k = 0; k < N_EVENTS; k++)
    fprintf(out, "event %llu %lld %lld\n", ev_count[k], ev_first[k], ev_last[k]);
  if (took_before) put_words(out, "before", before);
  put_words(out, "after", after);
  fclose(out);
  top.final();
  return 0;
}
