// The compiled bench of a ring all-reduce: N instances of one Verilator model of a
// ReduceLane, lane r's o into lane r + 1's i, driven cycle by cycle with no Python in the
// loop (squeezenic_hw/sim/ring_model.py builds it and reads what it writes).
//
// It does what squeezenic_hw/sim/reduce_ring.py's Amaranth testbenches do, on the schedule
// the input gives: every lane's configuration disabled and the template from cycle 0, the
// sign values' table one entry a cycle from cycle 0, the configuration enabled at cycle
// ENABLE_AT; then each host offers its contribution frames from cycle SETUP on, a random
// idle cycle before each beat (probability `idle`); each link idles in a cycle with
// probability `link_gap` whatever its lanes offer; the host-side outputs are always ready.
// The run ends 50 cycles after the last expected result beat, or fails (exit 3, its output
// written) after `timeout` cycles.
// Its random numbers are its own (a seeded std::mt19937_64): cycle numbers differ from the
// Amaranth run's, frames and counters do not.
//
// argv: input file, output file, idle, link_gap, seed, quiet (unused), timeout, result
// beats expected in all.
// Input (little-endian): u64 nodes, ENABLE_AT, SETUP; u64 table entries and each as u32;
// per node CFG_WORDS u32 of its disabled and CFG_WORDS of its enabled configuration;
// TEMPLATE_WORDS u32 of the template; per node its host frames (bench_io.h).
// Output: u64 cycles; u64 first cycle a host offered a beat; per node and stream (results,
// link to the successor, host_other, bypass) the beats as OutputFile::beats writes them;
// per node COUNTER_WORDS u32 of its counters; f64 seconds spent in the loop.
// Progress: every 65536 cycles a line "progress DONE TOTAL" (result beats) on stderr.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "Vtop.h"
#include "bench_io.h"
#include "ring_ports.h"
#include "verilated.h"

// What one node's outputs gave: the beats and their cycles, per stream.
struct Taken {
  std::vector<uint64_t> cycles;
  std::vector<uint32_t> words;
  void add(uint64_t t, const uint32_t *w) {
    cycles.push_back(t);
    words.insert(words.end(), w, w + PAYLOAD_WORDS);
  }
};

int main(int argc, char **argv) {
  FILE *in = open_input(argc, argv, 9,
                        "ring_model IN OUT IDLE LINK_GAP SEED QUIET TIMEOUT RESULT_BEATS");
  const RunArgs run = run_args(argv);
  const uint64_t expected = strtoull(argv[8], nullptr, 10);

  const size_t n = read_u64(in);
  const uint64_t enable_at = read_u64(in), setup = read_u64(in);
  std::vector<uint32_t> table(read_u64(in));
  std::vector<uint32_t> cfg_off(n * CFG_WORDS), cfg_on(n * CFG_WORDS), tmpl(TEMPLATE_WORDS);
  read_words(in, table.data(), table.size());
  for (size_t r = 0; r < n; r++) {
    read_words(in, &cfg_off[r * CFG_WORDS], CFG_WORDS);
    read_words(in, &cfg_on[r * CFG_WORDS], CFG_WORDS);
  }
  read_words(in, tmpl.data(), TEMPLATE_WORDS);
  std::vector<Source> hosts(n);
  for (auto &h : hosts) h.read(in, PAYLOAD_WORDS);
  fclose(in);

  VerilatedContext ctx;
  std::vector<std::unique_ptr<Vtop>> lanes;
  for (size_t r = 0; r < n; r++) {
    lanes.emplace_back(new Vtop(&ctx, ("node" + std::to_string(r)).c_str()));
    Vtop &top = *lanes.back();
    // no reset pulse: the registers start at their initial values, as in Amaranth's simulator
    set_cfg(top, &cfg_off[r * CFG_WORDS]);
    set_template(top, tmpl.data());
    CFG_PORT_INIT(top);
    for (int k = 0; k < N_OUT; k++) set_output_ready(top, k, true);
    top.clk = 0; top.eval();
  }
  const uint64_t entries = table.size();

  std::mt19937_64 rng(run.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<std::vector<Taken>> taken(n, std::vector<Taken>(N_OUT + 1));  // N_OUT: the link
  std::vector<char> gap(n, 0), link_valid(n, 0), link_ready(n, 0);
  std::vector<char> took(n);
  uint32_t w[PAYLOAD_WORDS];
  uint64_t t = 0, first = 0, got = 0, end_at = 0;
  bool started = false, stopped = false;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (size_t r = 0; r < n; r++) {
      Vtop &top = *lanes[r];
      top.table_we = t < entries;
      top.table_addr = (uint32_t)(t < entries ? t : 0);
      top.table_data = t < entries ? table[t] : 0;
      if (t == enable_at) set_cfg(top, &cfg_on[r * CFG_WORDS]);
      Source &h = hosts[r];
      if (!h.offering && !h.done && t >= setup)
        h.offering = !(run.idle > 0 && uniform(rng) < run.idle);
      set_host(top, h.offering, h.offering ? h.words(PAYLOAD_WORDS) : nullptr);
      gap[r] = run.backpressure > 0 && uniform(rng) < run.backpressure;
    }
    if (!started) {
      for (auto &h : hosts) started = started || h.offering;
      if (started) first = t;
    }
    // the links: what each lane offers and takes, settled (a lane's o.valid and i.ready
    // are registers, so one evaluation settles them; the loop checks it)
    for (int pass = 0;; pass++) {
      bool changed = false;
      for (size_t r = 0; r < n; r++) {
        Vtop &a = *lanes[r], &b = *lanes[(r + 1) % n];
        const bool v = o_valid(a) && !gap[r], rd = i_ready(b) && !gap[r];
        changed = changed || pass == 0 || v != (bool)link_valid[r] || rd != (bool)link_ready[r];
        link_valid[r] = v; link_ready[r] = rd;
        if (v) get_o(a, w);
        set_i(b, v, v ? w : nullptr);
        set_o_ready(a, rd);
      }
      if (!changed) break;
      if (pass == 8) { fprintf(stderr, "the links do not settle at cycle %llu\n", (unsigned long long)t); return 4; }
      for (auto &lane : lanes) { lane->clk = 0; lane->eval(); }
    }
    for (size_t r = 0; r < n; r++) {
      Vtop &top = *lanes[r];
      took[r] = hosts[r].offering && host_ready(top);
      for (int k = 0; k < N_OUT; k++) {
        if (!output_valid(top, k)) continue;
        output_payload(top, k, w);
        taken[r][k].add(t + 1, w);
        got += k == RESULTS_OUT;
      }
      if (link_valid[r] && link_ready[r]) {
        get_o(top, w);
        taken[r][N_OUT].add(t + 1, w);
      }
    }
    for (auto &lane : lanes) { lane->clk = 1; lane->eval(); }
    t++;
    for (size_t r = 0; r < n; r++)
      if (took[r]) hosts[r].taken();
    if ((t & 0xFFFF) == 0) {
      fprintf(stderr, "progress %llu %llu\n", (unsigned long long)got, (unsigned long long)expected);
      fflush(stderr);
    }
    if (!end_at && got >= expected) end_at = t + 50;   // nothing more may leave
    if (end_at && t >= end_at) break;
    if (t > run.timeout) {
      fprintf(stderr, "the ring stopped: %llu of %llu result beats after %llu cycles\n",
              (unsigned long long)got, (unsigned long long)expected, (unsigned long long)t);
      for (size_t r = 0; r < n; r++)
        fprintf(stderr, "node %zu: host beat %zu of its frame %zu of %zu, host ready %d, "
                "link out valid %d ready %d\n", r, hosts[r].beat, hosts[r].frame,
                hosts[r].frames.size(), (int)host_ready(*lanes[r]), (int)o_valid(*lanes[r]),
                (int)link_ready[r]);
      stopped = true;   // what it gave is written all the same
      break;
    }
  }
  const double seconds = seconds_since(start);

  OutputFile out(argv[2]);
  out.u64(t); out.u64(first);
  for (size_t r = 0; r < n; r++) {
    const int order[4] = {RESULTS_OUT, N_OUT, HOST_OTHER_OUT, BYPASS_OUT};
    for (int k : order) out.beats(taken[r][k].cycles, taken[r][k].words, PAYLOAD_WORDS);
  }
  std::vector<uint32_t> counters(COUNTER_WORDS);
  for (size_t r = 0; r < n; r++) {
    get_counters(*lanes[r], counters.data());
    out.words(counters.data(), COUNTER_WORDS);
  }
  out.f64(seconds);
  return stopped ? 3 : 0;
}
