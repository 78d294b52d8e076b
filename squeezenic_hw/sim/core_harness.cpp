// The compiled bench of the OpenNIC plugin's core: a Verilator model of a SqueezeNicCore
// (or the core with its wire port looped back) driven cycle by cycle with no Python in the
// loop (squeezenic_hw/sim/core_model.py builds it and reads what it writes).
//
// Each input stream is a FrameSource of squeezenic_hw/sim/axis.py (frames at their earliest
// arrival cycles, a random idle cycle before each beat with probability `idle`); each output
// stream is a FrameSink (ready low in a cycle with probability `backpressure`). Meanwhile an
// AXI-Lite master runs the register script one step at a time:
//   0 WRITE addr data          awvalid and wvalid together, then bready until bvalid
//   1 READ addr                arvalid, then rready until rvalid
//   2 WAIT cycles
//   3 POLL addr value every    WAIT every, READ addr, again until the data is value
//   4 INPUTS_DONE              until every input stream has sent its last beat
//   5 FRAMES output count      until that output stream has given count frames
// The run ends `quiet` cycles after the later of the script's end, the inputs' end and
// the last output beat, or fails (exit 3) after `timeout` cycles.
//
// argv: input file, output file, idle, backpressure, seed, quiet, timeout.
// Input (little-endian): u64 step count, each step u64 kind, a, b, c; then per input
// stream (the header's order) u64 frame count, per frame u64 earliest cycle, u64 beat
// count, each beat PAYLOAD_WORDS u32 words. Output: u64 cycles; per output stream u64 beat
// count, per beat u64 cycle and PAYLOAD_WORDS words; u64 response count, per response
// (one per WRITE and READ, and a POLL's last read) u64 step index, u64 cycle, u64 addr,
// u64 data, u64 resp; f64 seconds spent in the loop.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "Vtop.h"
#include "bench_io.h"
#include "core_ports.h"
#include "verilated.h"

struct Step { uint64_t kind, a, b, c; };
struct Response { uint64_t step, cycle, addr, data, resp; };

int main(int argc, char **argv) {
  FILE *in = open_input(argc, argv, 8,
                        "core_model IN OUT IDLE BP SEED QUIET TIMEOUT");
  const RunArgs run = run_args(argv);

  std::vector<Step> script(read_u64(in));
  for (auto &s : script) { s.kind = read_u64(in); s.a = read_u64(in); s.b = read_u64(in); s.c = read_u64(in); }
  std::vector<Source> sources(N_IN);
  for (auto &src : sources) src.read(in, PAYLOAD_WORDS);
  fclose(in);

  VerilatedContext ctx;
  Vtop top(&ctx);
  std::mt19937_64 rng(run.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  // no reset pulse: the registers start at their initial values, as in Amaranth's simulator
  top.clk = 0; top.eval();

  std::vector<std::vector<uint64_t>> out_cycles(N_OUT);
  std::vector<std::vector<uint32_t>> out_words(N_OUT);
  std::vector<uint64_t> out_frames(N_OUT, 0);
  std::vector<Response> responses;
  uint32_t beat_words[PAYLOAD_WORDS];

  // the AXI-Lite master: phase 0 starts the step, 1 waits for the address/data handshakes,
  // 2 waits for the response, 3 waits (WAIT, POLL's interval, INPUTS_DONE, FRAMES)
  size_t step = 0;
  int phase = 0;
  bool aw_done = false, w_done = false;
  uint64_t wait_until = 0;
  uint64_t t = 0, last_event = 0;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    bool inputs_done = true;
    for (int k = 0; k < N_IN; k++) {
      Source &s = sources[k];
      if (!s.offering && !s.done && (s.beat > 0 || t >= s.frames[s.frame].at))
        s.offering = !(run.idle > 0 && uniform(rng) < run.idle);
      set_input(top, k, s.offering,
                s.offering ? s.words(PAYLOAD_WORDS) : nullptr);
      inputs_done = inputs_done && s.done;
    }
    bool ready[N_OUT > 0 ? N_OUT : 1];
    for (int k = 0; k < N_OUT; k++) {
      ready[k] = !(run.backpressure > 0 && uniform(rng) < run.backpressure);
      set_output_ready(top, k, ready[k]);
    }

    // the master's requests for this cycle
    const Step *s = step < script.size() ? &script[step] : nullptr;
    if (s && phase == 0) {
      if (s->kind == 0) { aw_done = w_done = false; phase = 1; }
      else if (s->kind == 1) { phase = 1; }
      else if (s->kind == 2 || s->kind == 3) { wait_until = t + (s->kind == 2 ? s->a : s->c); phase = 3; }
      else { phase = 3; }
    }
    const bool writing = s && s->kind == 0, reading = s && (s->kind == 1 || s->kind == 3);
    top.AXIL(awvalid) = writing && phase == 1 && !aw_done;
    top.AXIL(wvalid) = writing && phase == 1 && !w_done;
    top.AXIL(awaddr) = (uint32_t)(writing ? s->a : 0);
    top.AXIL(wdata) = (uint32_t)(writing ? s->b : 0);
    top.AXIL(bready) = writing && phase == 2;
    top.AXIL(arvalid) = reading && phase == 1;
    top.AXIL(araddr) = (uint32_t)(reading ? s->a : 0);
    top.AXIL(rready) = reading && phase == 2;

    top.clk = 0; top.eval();
    bool took[N_IN > 0 ? N_IN : 1];
    for (int k = 0; k < N_IN; k++) took[k] = sources[k].offering && input_ready(top, k);
    bool gave[N_OUT > 0 ? N_OUT : 1];
    for (int k = 0; k < N_OUT; k++) {
      gave[k] = ready[k] && output_valid(top, k);
      if (gave[k]) {
        output_payload(top, k, beat_words);
        out_words[k].insert(out_words[k].end(), beat_words, beat_words + PAYLOAD_WORDS);
        if ((beat_words[LAST_WORD] >> LAST_SHIFT) & 1) out_frames[k]++;
      }
    }
    // the master's handshakes in this cycle (seen before the edge)
    bool step_done = false;
    if (s && phase == 1 && writing) {
      aw_done = aw_done || top.AXIL(awready);
      w_done = w_done || top.AXIL(wready);
      if (aw_done && w_done) phase = 2;
    } else if (s && phase == 1 && reading) {
      if (top.AXIL(arready)) phase = 2;
    } else if (s && phase == 2 && writing && top.AXIL(bvalid)) {
      responses.push_back({step, t, s->a, s->b, top.AXIL(bresp)});
      step_done = true;
    } else if (s && phase == 2 && reading && top.AXIL(rvalid)) {
      const uint64_t data = top.AXIL(rdata);
      if (s->kind == 1 || data == s->b) {
        responses.push_back({step, t, s->a, data, top.AXIL(rresp)});
        step_done = true;
      } else {
        wait_until = t + s->c;   // poll again
        phase = 3;
      }
    } else if (s && phase == 3) {
      if (s->kind == 2) step_done = t + 1 >= wait_until;
      else if (s->kind == 3) { if (t + 1 >= wait_until) phase = 1; }
      else if (s->kind == 4) step_done = inputs_done;
      else if (s->kind == 5) step_done = s->a < (uint64_t)N_OUT && out_frames[s->a] >= s->b;
    }

    top.clk = 1; top.eval();
    t++;
    for (int k = 0; k < N_OUT; k++)
      if (gave[k]) { out_cycles[k].push_back(t); last_event = t; }
    for (int k = 0; k < N_IN; k++)
      if (took[k] && sources[k].taken()) last_event = t > last_event ? t : last_event;
    if (step_done) { step++; phase = 0; last_event = t > last_event ? t : last_event; }

    bool all_in = true;
    for (auto &src : sources) all_in = all_in && src.done;
    if (all_in && step >= script.size() && t - last_event >= run.quiet) break;
    if (t > run.timeout) {
      fprintf(stderr, "timeout after %llu cycles: register step %zu of %zu\n",
              (unsigned long long)t, step, script.size());
      return 3;
    }
  }
  const double seconds = seconds_since(start);

  OutputFile out(argv[2]);
  out.u64(t);
  for (int k = 0; k < N_OUT; k++) out.beats(out_cycles[k], out_words[k], PAYLOAD_WORDS);
  out.u64(responses.size());
  for (auto &r : responses) {
    out.u64(r.step); out.u64(r.cycle); out.u64(r.addr); out.u64(r.data); out.u64(r.resp);
  }
  out.f64(seconds);
  return 0;
}
