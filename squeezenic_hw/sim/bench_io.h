// The files of the compiled benches (lane_harness.cpp, core_harness.cpp, ring_harness.cpp):
// little-endian u64 values and frames of beats in, u64 values and output beats out; and an
// input stream's frames as a bench offers them.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

static uint64_t read_u64(FILE *f) {
  uint64_t v = 0;
  if (fread(&v, 8, 1, f) != 1) { fprintf(stderr, "short input file\n"); exit(2); }
  return v;
}

// `n` u32 words into `w` (exit 2 on a short file).
static void read_words(FILE *f, uint32_t *w, size_t n) {
  if (fread(w, 4, n, f) != n) { fprintf(stderr, "short input file\n"); exit(2); }
}

// A frame: its earliest arrival cycle and its beats, `payload_words` u32 words each.
struct InputFrame { uint64_t at; uint64_t beats; std::vector<uint32_t> words; };

// u64 frame count, then per frame u64 earliest cycle, u64 beat count and the beats' words.
static std::vector<InputFrame> read_frames(FILE *f, int payload_words) {
  std::vector<InputFrame> frames(read_u64(f));
  for (auto &fr : frames) {
    fr.at = read_u64(f);
    fr.beats = read_u64(f);
    fr.words.resize(fr.beats * payload_words);
    read_words(f, fr.words.data(), fr.words.size());
  }
  return frames;
}

// An input stream: its frames (read_frames), the beat it is at and whether it offers it
// (a FrameSource of squeezenic_hw/sim/axis.py; the bench decides when it offers).
struct Source {
  std::vector<InputFrame> frames;
  size_t frame = 0, beat = 0;
  bool offering = false, done = false;
  void read(FILE *f, int payload_words) {
    frames = read_frames(f, payload_words);
    done = frames.empty();
  }
  const uint32_t *words(int payload_words) const {
    return &frames[frame].words[beat * payload_words];
  }
  // The beat offered was taken: on to the next one. True when it was the stream's last.
  bool taken() {
    offering = false;
    if (++beat < frames[frame].beats) return false;
    beat = 0;
    done = ++frame == frames.size();
    return done;
  }
};

// argv[3..7], the same in every bench: idle, backpressure, seed, quiet, timeout.
struct RunArgs { double idle, backpressure; uint64_t seed, quiet, timeout; };

static RunArgs run_args(char **argv) {
  return {atof(argv[3]), atof(argv[4]), strtoull(argv[5], nullptr, 10),
          strtoull(argv[6], nullptr, 10), strtoull(argv[7], nullptr, 10)};
}

// The input file, argv[1], once argc is checked (exit 2 with `usage` otherwise).
static FILE *open_input(int argc, char **argv, int want_argc, const char *usage) {
  if (argc != want_argc) { fprintf(stderr, "usage: %s\n", usage); exit(2); }
  FILE *in = fopen(argv[1], "rb");
  if (!in) { perror(argv[1]); exit(2); }
  return in;
}

// The output file, argv[2] (exit 2 if it cannot be opened); closed when it goes out of scope.
struct OutputFile {
  FILE *f;
  explicit OutputFile(const char *path) : f(fopen(path, "wb")) {
    if (!f) { perror(path); exit(2); }
  }
  ~OutputFile() { fclose(f); }
  void u64(uint64_t v) { fwrite(&v, 8, 1, f); }
  void f64(double v) { fwrite(&v, 8, 1, f); }
  void words(const uint32_t *w, size_t n) { fwrite(w, 4, n, f); }
  // output beats: their count, then each beat's cycle and `payload_words` words
  void beats(const std::vector<uint64_t> &cycles, const std::vector<uint32_t> &words,
             int payload_words) {
    u64(cycles.size());
    for (size_t k = 0; k < cycles.size(); k++) {
      u64(cycles[k]);
      fwrite(&words[k * payload_words], 4, payload_words, f);
    }
  }
};

static double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
