// The compiled lane simulation's test bench: a Verilator model of a TxLane or RxLane
// driven cycle by cycle with no Python in the loop (squeezenic_hw/sim/compiled.py builds
// it and reads what it writes).
//
// It does what squeezenic_hw/sim/axis.py's FrameSource and FrameSink do: frames in at
// their earliest arrival cycles with a random idle cycle before each beat (probability
// `idle`), the output ready low in a cycle with probability `backpressure`; `close`
// raised 16 cycles after the last input beat (TX); the run ends `quiet` cycles after the
// later of the last output beat and the end of the input, or fails after `timeout`.
// Its random numbers are its own (a seeded std::mt19937_64), so cycle numbers differ
// from the Amaranth run's; frames and counters do not depend on them.
//
// argv: input file, output file, idle, backpressure, seed, quiet, timeout, close_at_end,
// and (TX) the idle timeout to set in cfg_idle_timeout, or -1 to keep the lane's initial value.
// Input (little-endian): u64 frame count; per frame u64 earliest cycle, u64 beat count,
// then each beat as PAYLOAD_WORDS u32 words. Output: u64 cycles, u64 input-done cycle,
// u64 output beat count, per output beat u64 cycle and PAYLOAD_WORDS words; u64 accepted
// frame count and their first-beat cycles; COUNTER_WORDS u32 words of the counters;
// f64 seconds spent in the loop; u64 cycles inside an output frame with the output ready
// and no beat (gaps); u64 cycles the input offered a beat the lane did not take (stalls).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "Vtop.h"
#include "bench_io.h"
#include "lane_ports.h"
#include "verilated.h"

int main(int argc, char **argv) {
  FILE *in = open_input(argc, argv, 10,
                        "lane_model IN OUT IDLE BP SEED QUIET TIMEOUT CLOSE IDLE_TIMEOUT");
  const RunArgs run = run_args(argv);
  const double idle = run.idle, backpressure = run.backpressure;
  const uint64_t seed = run.seed, quiet = run.quiet, timeout = run.timeout;
  const bool close_at_end = atoi(argv[8]) != 0;
  const long long idle_timeout = atoll(argv[9]);

  std::vector<InputFrame> frames = read_frames(in, PAYLOAD_WORDS);
  fclose(in);

  VerilatedContext ctx;
  Vtop top(&ctx);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  // no reset pulse: the registers start at their initial values, as in Amaranth's simulator
  SET_CONFIG(top);
#ifdef IDLE_TIMEOUT_PORT
  if (idle_timeout >= 0) top.IDLE_TIMEOUT_PORT = (uint32_t)idle_timeout;
#else
  if (idle_timeout >= 0) { fprintf(stderr, "this lane has no idle timeout\n"); return 2; }
#endif
  top.clk = 0; top.eval();

  std::vector<uint64_t> out_cycles, accepted;
  std::vector<uint32_t> out_words;
  size_t frame = 0, beat = 0;
  bool offering = false, input_done = frames.empty();
  uint64_t t = 0, done_cycle = 0, last_beat = 0, gaps = 0, stalls = 0;
  bool in_frame = false;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    // the source: wait for the frame's arrival, then an idle draw before each beat
    if (!offering && !input_done) {
      if (beat > 0 || t >= frames[frame].at)
        offering = !(idle > 0 && uniform(rng) < idle);
    }
    top.IN_VALID = offering;
    if (offering) {
      const uint32_t *w = &frames[frame].words[beat * PAYLOAD_WORDS];
      for (int k = 0; k < PAYLOAD_WORDS; k++) top.IN_PAYLOAD[k] = w[k];
    }
    const bool ready = !(backpressure > 0 && uniform(rng) < backpressure);
    top.OUT_READY = ready;
#ifdef HAS_CLOSE
    top.close = close_at_end && input_done && t >= done_cycle + 16;
#endif
    top.clk = 0; top.eval();
    const bool took = offering && top.IN_READY;
    if (offering && !took) stalls++;   // a beat offered and not taken
    const bool gave = ready && top.OUT_VALID;
    if (gave) {
      for (int k = 0; k < PAYLOAD_WORDS; k++) out_words.push_back(top.OUT_PAYLOAD[k]);
      in_frame = !((top.OUT_PAYLOAD[LAST_WORD] >> LAST_SHIFT) & 1);
    } else if (ready && in_frame) {
      gaps++;   // a cycle inside a frame with the output ready and no beat
    }
    top.clk = 1; top.eval();
    t++;
    if (gave) { out_cycles.push_back(t); last_beat = t; }
    if (took) {
      if (beat == 0) accepted.push_back(t);
      offering = false;
      if (++beat == frames[frame].beats) {
        beat = 0;
        if (++frame == frames.size()) { input_done = true; done_cycle = t; }
      }
    }
    if (input_done && t - (last_beat > done_cycle ? last_beat : done_cycle) >= quiet) break;
    if (t > timeout) {
      fprintf(stderr, "timeout: %zu output beats after %llu cycles\n", out_cycles.size(),
              (unsigned long long)t);
      return 3;
    }
  }
  const double seconds = seconds_since(start);

  OutputFile out(argv[2]);
  out.u64(t); out.u64(done_cycle);
  out.beats(out_cycles, out_words, PAYLOAD_WORDS);
  out.u64(accepted.size());
  for (uint64_t c : accepted) out.u64(c);
  for (int k = 0; k < COUNTER_WORDS; k++) {
    uint32_t w = COUNTER_WORD(top, k);
    out.words(&w, 1);
  }
  out.f64(seconds);
  out.u64(gaps);
  out.u64(stalls);
  return 0;
}
