// The `weft` binary end to end: exact text on the reference model, flags, and clear failures.
#include "cli/cli_run.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace {

using weft::test_cli::run;
using weft::test_cli::tiny_model;

const std::string kShared = WEFT_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";

// From ../shared/models/SOURCES.txt: greedy 60 tokens after BOS + "Once upon a time".
const std::string kReference =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a "
    "big, red ball. She wanted to play with it, but it was too high.\nLily";

TEST(Cli, RunPrintsTheReferenceTextOnEverySplit) {
  WEFT_NEED_SHARED_FILE(kStories);
  for (const std::string devices :
       {"", "--mmap", "-ctk f32 -ctv f32", "--devices cpu:1,cpu:1", "--devices cpu:1,cpu:1 --mmap",
        "--devices cpu:1,cpu:1,cpu:1 -ts 3,1,2", "--devices cpu:1,cpu:1 -sm layer",
        "-b 2" /* the prompt in pieces, all but the last unsampled */}) {
    auto r = run("run -m " + kStories + " -p \"Once upon a time\" -n 60 --temp 0 " + devices);
    EXPECT_EQ(r.code, 0) << devices;
    EXPECT_EQ(r.out, kReference) << devices;
  }
}

TEST(Cli, JsonHasIdsAndTimings) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto r = run("run -m " + kStories + " -p \"Once upon a time\" -n 4 --temp 0 --json");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("\"prompt_ids\":[1,403,407,261,378]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"generated_ids\":[432,383,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"gen_tokens_per_s\""), std::string::npos);
}

TEST(Cli, ContextFullStopsSayingSo) {
  // 4 prompt tokens and -n 100 in a context of 16: llama.cpp says why it stopped early; so must we.
  auto r = run("run -m " + tiny_model() + " -p \"a b c\" -n 100 -c 16 --temp 0", true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("context full (-c 16)"), std::string::npos) << r.out;
  auto j = run("run -m " + tiny_model() + " -p \"a b c\" -n 100 -c 16 --temp 0 --json");
  EXPECT_NE(j.out.find("\"stop\":\"context_full\""), std::string::npos) << j.out;
  auto ok = run("run -m " + tiny_model() + " -p \"a b c\" -n 2 -c 16 --temp 0", true);
  EXPECT_EQ(ok.out.find("context full"), std::string::npos) << ok.out;
}

TEST(Cli, GenModelWritesAChatTemplateAndItsControlTokens) {
  const std::string p = testing::TempDir() + "/weft_cli_chatml.gguf";
  ASSERT_EQ(run("gen-model -o " + p + " --chat-template chatml").code, 0);
  // chatml is written as its usual Jinja text, so llama.cpp's Jinja engine reads it too.
  const std::string info = run("info " + p).out;
  EXPECT_NE(
      info.find("tokenizer.chat_template                 string       \"{% for message in messages %}{{'<|im_start|>'"),
      std::string::npos)
      << info;
  // BOS, then <|im_start|> as one control token (the last ids), then "user" in pieces.
  const auto ids = run("tokenize -m " + p + " -p \"<|im_start|>user\"").out;
  EXPECT_EQ(ids.rfind("[1, 318, ", 0), 0u) << ids;
  auto bad = run("gen-model -o " + p + " --chat-template nonsense", true);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--chat-template 'nonsense'"), std::string::npos) << bad.out;
}

TEST(Cli, TokenizePrintsIds) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto r = run("tokenize -m " + kStories + " -p \"Once upon a time\"");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
}

TEST(Cli, PlanShowsTwoAllReducesPerLayer) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto r = run("plan -m " + kStories + " --devices cpu:1,cpu:1,cpu:1");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("layer 0: 2: all_reduce after attn_output"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fallbacks (ops without a split rule, gathered and replicated): none"), std::string::npos)
      << r.out;
  // Whether the split keeps one device's bits: stories260K's heads of 8 and its FFN of 172 both
  // reduce in granules of 8 (the FFN's 128 halved until it leaves 16 of them).
  EXPECT_NE(r.out.find("results: within rounding of one device's"), std::string::npos) << r.out;
  r = run("plan -m " + kStories + " --devices cpu:1,cpu:1,cpu:1 --exact");
  EXPECT_NE(r.out.find("results: one device's, bit for bit (--exact: the split sums added in fixed point, granules "
                       "of 8 features)"),
            std::string::npos)
      << r.out;
}

// Gemma 3's sliding-window layers: weft plan says what their KV cache keeps, and its KV column
// counts those rows, not the context. The tiny shape's K and V are 32 values a position (2 KV heads
// of 16), f16: 128 bytes. At -c 4096 layer 1 (global) holds 4096 positions, layer 0 (window 64,
// steps of 32) 2 x (64 + 32) = 192: (4096 + 192) x 128 bytes = 0.52 MiB, where the whole context
// would take 1.00 MiB.
TEST(Cli, PlanCountsTheSlidingWindowsCache) {
  const std::string m = weft::test_cli::generated_model("gemma3", "--arch gemma3 --sliding-window 64 --ctx 8192");
  auto r = run("plan -m " + m + " -c 4096 -b 32");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("sliding window: 64 positions in 1 of 2 layers, whose KV cache keeps 192 of the 4096 per slot"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| 0.52 MiB |"), std::string::npos) << r.out;
}

// Gemma 4 with experts (26B-A4B's layout): the ffn column is its dense FFN's rows (160, on blocks
// of 32) beside the experts, and each layer's three all-reduces are listed (attention, the dense
// FFN, the experts).
TEST(Cli, PlanShowsGemma4sDenseFfnBesideItsExperts) {
  const std::string m =
      weft::test_cli::generated_model("gemma4-moe", "--arch gemma4 --n-expert 8 --n-expert-used 2 --n-ff-exp 96");
  auto r = run("plan -m " + m + " --devices cpu:1,cpu:1 --moe-split tensor");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| 0..95 | all, features 0..63 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 96..159 | all, features 64..95 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer 0: 3: all_reduce after attn_output (256 B), all_reduce after ffn_down (256 B), "
                       "all_reduce after ffn_down_exps (256 B)"),
            std::string::npos)
      << r.out;
}

// Gemma 4 E2B's layout in the plan: the FFN widths, which layers read which cache, the per-layer
// inputs kept whole; two all-reduces a layer; a layer split keeps the last two layers with the
// caches they read (every layer on the second device).
TEST(Cli, PlanShowsGemma4E2bsLayout) {
  const std::string m = weft::test_cli::generated_model(
      "gemma4-e2b", "--arch gemma4 --n-layer 4 --n-embd-per-layer 16 --shared-kv-layers 2");
  auto r = run("plan -m " + m + " --devices cpu:1,cpu:1");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* line : {"ffn per layer: 2 layers 160 wide, 2 layers 320 wide, each cut by the shares",
                           "shared KV caches: layers 2 over layer 0's; layers 3 over layer 1's (no cache of their own)",
                           "per-layer inputs: 16 values a layer, computed whole on every device (no collective)",
                           "layer 3: 2: all_reduce after attn_output (256 B), all_reduce after ffn_down (256 B)",
                           "fallbacks (ops without a split rule, gathered and replicated): none"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  auto layers = run("plan -m " + m + " --devices cpu:1,cpu:1 -sm layer");
  EXPECT_EQ(layers.code, 0) << layers.out;
  EXPECT_NE(layers.out.find("| - |\n"), std::string::npos) << layers.out;
  EXPECT_NE(layers.out.find("| 0..3 |\n"), std::string::npos) << layers.out;
}

TEST(Cli, PlanSizesCollectivesInTheWireType) {
  WEFT_NEED_SHARED_FILE(kStories);
  // stories260K: n_embd 64, 5 layers, two all-reduces each.
  auto f32 = run("plan -m " + kStories + " --devices cpu:1,cpu:1");
  EXPECT_NE(f32.out.find("after attn_output (256 B)"), std::string::npos) << f32.out;
  EXPECT_NE(f32.out.find("total: 10 collectives, 2560 bytes per rank per token (f32)"), std::string::npos) << f32.out;
  auto bf16 = run("plan -m " + kStories + " --devices cpu:1,cpu:1 --wire bf16");
  EXPECT_NE(bf16.out.find("after attn_output (128 B)"), std::string::npos) << bf16.out;
  EXPECT_NE(bf16.out.find("total: 10 collectives, 1280 bytes per rank per token (bf16)"), std::string::npos)
      << bf16.out;
}

// The cost model's table: tensor split pays 10 one-message all-reduces and the step's round trip,
// layer split a round trip per device and one hand-off through the coordinator;
// with slow devices and a fast link the tensor split wins, a slow link turns the order round.
// Without speeds the table is not guessed.
TEST(Cli, PlanPrintsExpectedStepTimesFromTheCostModel) {
  WEFT_NEED_SHARED_FILE(kStories);
  const std::string base = "plan -m " + kStories + " --devices cpu:1,cpu:1 --device-gbs 0.1";
  auto fast = run(base + " --link-latency-us 20 --link-gbit 10");
  ASSERT_EQ(fast.code, 0) << fast.out;
  EXPECT_NE(fast.out.find("link 20 us per message, 10.0 Gbit/s; f32 wire"), std::string::npos) << fast.out;
  EXPECT_NE(fast.out.find("| tensor | "), std::string::npos) << fast.out;
  EXPECT_NE(fast.out.find(" | 12 | 2.5 | "), std::string::npos) << "10 messages of 256 B" << fast.out;
  EXPECT_NE(fast.out.find(" | 4 | 0.5 | "), std::string::npos) << "a hand-off of 256 B, twice" << fast.out;
  auto tps = [](const std::string& out, const std::string& split) {
    const size_t row = out.find("| " + split + " | ");
    const size_t end = out.find('\n', row), last = out.rfind("| ", end - 3);
    return std::stod(out.substr(last + 2, end - last - 3));
  };
  EXPECT_GT(tps(fast.out, "tensor"), tps(fast.out, "layer")) << fast.out;
  auto slow = run(base + " --link-latency-us 5000 --link-gbit 0.1");
  EXPECT_LT(tps(slow.out, "tensor"), tps(slow.out, "layer")) << slow.out;
  auto none = run("plan -m " + kStories + " --devices cpu:1,cpu:1");
  EXPECT_NE(none.out.find("give --device-gbs"), std::string::npos) << none.out;
  auto wrong = run(base + ",1,1", true);
  EXPECT_NE(wrong.code, 0);
  EXPECT_NE(wrong.out.find("--device-gbs has 3 values for 2 devices"), std::string::npos) << wrong.out;
}

// gen-model --split-max-tensors writes llama-gguf-split's parts; run reads them from the first.
TEST(Cli, SplitModelRunsAsTheWholeFile) {
  const std::string prefix = testing::TempDir() + "/weft_cli_split";
  auto g = run("gen-model -o " + prefix + ".gguf --preset tiny --type q8_0 --split-max-tensors 5", true);
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("wrote " + prefix + "-00005-of-00005.gguf"), std::string::npos) << g.out;
  const std::string args = " -p \"a b c\" -n 12 --temp 0";
  const auto whole = run("run -m " + tiny_model() + args);
  ASSERT_EQ(whole.code, 0);
  EXPECT_EQ(run("run -m " + prefix + "-00001-of-00005.gguf" + args).out, whole.out);
  EXPECT_EQ(run("run -m " + prefix + "-00001-of-00005.gguf --devices cpu:1,cpu:1,cpu:1" + args).out, whole.out);
  std::filesystem::remove(prefix + "-00004-of-00005.gguf");
  auto missing = run("run -m " + prefix + "-00001-of-00005.gguf" + args, true);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("part 4 of 5"), std::string::npos) << missing.out;
}

// llama-perplexity's lines: the running estimate per chunk, then the final one with its error.
TEST(Cli, PerplexityPrintsLlamaPerplexitysLines) {
  WEFT_NEED_SHARED_FILE(kStories);
  const std::string text = testing::TempDir() + "/weft_cli_ppl.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 6; ++i)
      out << "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
             "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n";
  }
  const auto one = run("perplexity -m " + kStories + " -f " + text + " -c 64 -b 64");
  ASSERT_EQ(one.code, 0) << one.out;
  const std::regex lines(
      R"(^(\[[0-9]+\][0-9]+\.[0-9]{4},)+\nFinal estimate: PPL = ([0-9]+\.[0-9]{4}) \+/- [0-9]+\.[0-9]{5}\n$)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(one.out, m, lines)) << one.out;
  EXPECT_EQ(one.out.rfind("[1]", 0), 0u);
  const double ppl = std::stod(m[2].str());
  EXPECT_GT(ppl, 1.0);
  const auto three = run("perplexity -m " + kStories + " -f " + text + " -c 64 -b 256 --devices cpu:1,cpu:1,cpu:1");
  ASSERT_TRUE(std::regex_match(three.out, m, lines)) << three.out;
  EXPECT_NEAR(std::stod(m[2].str()), ppl, 1e-3 * ppl);

  std::ofstream(text) << "Once upon a time.";
  auto short_text = run("perplexity -m " + kStories + " -f " + text + " -c 64", true);
  EXPECT_EQ(short_text.code, 1);
  EXPECT_NE(short_text.out.find("you need at least 128 tokens"), std::string::npos) << short_text.out;
}

// llama-bench's fields and JSON types (tools/llama-bench/llama-bench.cpp, test::get_fields and
// get_field_type, in the schema compare-llama-bench.py reads, which has use_mmap), plus weft's own
// devices and wire. s: string, b: bool, i: integer, f: float.
const std::vector<std::pair<std::string, char>> kBenchFields = {
    {"build_commit", 's'}, {"build_number", 'i'}, {"cpu_info", 's'},
    {"gpu_info", 's'},     {"backends", 's'},     {"model_filename", 's'},
    {"model_type", 's'},   {"model_size", 'i'},   {"model_n_params", 'i'},
    {"n_batch", 'i'},      {"n_ubatch", 'i'},     {"n_threads", 'i'},
    {"cpu_mask", 's'},     {"cpu_strict", 'b'},   {"poll", 'i'},
    {"type_k", 's'},       {"type_v", 's'},       {"n_gpu_layers", 'i'},
    {"split_mode", 's'},   {"main_gpu", 'i'},     {"no_kv_offload", 'b'},
    {"flash_attn", 'b'},   {"tensor_split", 's'}, {"tensor_buft_overrides", 's'},
    {"use_mmap", 'b'},     {"embeddings", 'b'},   {"no_op_offload", 'i'},
    {"n_prompt", 'i'},     {"n_gen", 'i'},        {"n_depth", 'i'},
    {"test_time", 's'},    {"avg_ns", 'i'},       {"stddev_ns", 'i'},
    {"avg_ts", 'f'},       {"stddev_ts", 'f'},    {"devices", 's'},
    {"wire", 's'}};
// What compare-llama-bench.py refuses a row without (LLAMA_BENCH_KEY_PROPERTIES + build_commit,
// test_time, avg_ts).
const std::vector<std::string> kCompareScriptKeys = {
    "cpu_info",       "gpu_info",   "backends",      "n_gpu_layers", "tensor_buft_overrides",
    "model_filename", "model_type", "n_batch",       "n_ubatch",     "embeddings",
    "cpu_mask",       "cpu_strict", "poll",          "n_threads",    "type_k",
    "type_v",         "use_mmap",   "no_kv_offload", "split_mode",   "main_gpu",
    "tensor_split",   "flash_attn", "n_prompt",      "n_gen",        "n_depth",
    "build_commit",   "test_time",  "avg_ts"};

bool has_type(const nlohmann::json& v, char t) {
  switch (t) {
    case 's': return v.is_string();
    case 'b': return v.is_boolean();
    case 'i': return v.is_number_integer();
    default: return v.is_number_float();
  }
}

void expect_bench_record(const nlohmann::json& j, int reps) {
  for (const auto& [name, type] : kBenchFields) {
    ASSERT_TRUE(j.contains(name)) << name << " in " << j.dump();
    EXPECT_TRUE(has_type(j[name], type)) << name << " = " << j[name].dump();
  }
  for (const std::string& k : kCompareScriptKeys) EXPECT_TRUE(j.contains(k)) << k;
  ASSERT_EQ(j["samples_ns"].size(), size_t(reps));
  ASSERT_EQ(j["samples_ts"].size(), size_t(reps));
  double mean = 0;
  for (const auto& t : j["samples_ts"]) mean += t.get<double>() / reps;
  EXPECT_NEAR(j["avg_ts"].get<double>(), mean, 1e-3 * mean);
  for (const auto& ns : j["samples_ns"]) EXPECT_TRUE(ns.is_number_unsigned() && ns.get<uint64_t>() > 0);
  EXPECT_GT(j["n_prompt"].get<int>() + j["n_gen"].get<int>(), 0);
  EXPECT_EQ(j["model_filename"], tiny_model());
}

// llama-bench's flags as comma lists: every combination is a record, in llama-bench's order.
TEST(Cli, BenchWritesLlamaBenchRecords) {
  const std::string flags = " -m " + tiny_model() + " -p 8,16 -n 2 -pg 8,2 -d 0,4 -t 1,2 -r 2";
  auto json = run("bench" + flags + " -o json");
  ASSERT_EQ(json.code, 0) << json.out;
  const nlohmann::json arr = nlohmann::json::parse(json.out);
  ASSERT_EQ(arr.size(), 2u * 2u * 4u);  // threads x depth x (pp8, pp16, tg2, pp8+tg2)
  for (const auto& j : arr) expect_bench_record(j, 2);
  EXPECT_EQ(arr[0]["n_threads"], 1);
  EXPECT_EQ(arr[8]["n_threads"], 2);
  EXPECT_EQ(arr[4]["n_depth"], 4);
  EXPECT_EQ(arr[3]["n_prompt"], 8);
  EXPECT_EQ(arr[3]["n_gen"], 2);

  auto jsonl = run("bench" + flags + " -o jsonl");
  ASSERT_EQ(jsonl.code, 0);
  std::istringstream lines(jsonl.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) expect_bench_record(nlohmann::json::parse(line), 2);
  EXPECT_EQ(n, 16);

  auto csv = run("bench -m " + tiny_model() + " -p 8 -n 2 -r 1 -o csv --devices cpu:1,cpu:1");
  ASSERT_EQ(csv.code, 0);
  std::istringstream rows(csv.out);
  std::string header;
  std::getline(rows, header);
  std::string want;
  for (const auto& [name, type] : kBenchFields) want += (want.empty() ? "" : ",") + name;
  EXPECT_EQ(header, want);
  int n_rows = 0;
  for (std::string row; std::getline(rows, row); ++n_rows) {
    std::vector<std::string> cells;  // every value quoted, as llama-bench writes them
    const std::regex cell("\"((?:[^\"]|\"\")*)\"(,|$)");
    for (auto it = std::sregex_iterator(row.begin(), row.end(), cell); it != std::sregex_iterator(); ++it)
      cells.push_back((*it)[1]);
    ASSERT_EQ(cells.size(), kBenchFields.size()) << row;
    for (size_t i = 0; i < cells.size(); ++i) {
      const char t = kBenchFields[i].second;
      if (t == 'i' || t == 'b')
        EXPECT_TRUE(std::regex_match(cells[i], std::regex("-?[0-9]+"))) << kBenchFields[i].first;
      if (t == 'f') EXPECT_NO_THROW((void)std::stod(cells[i])) << kBenchFields[i].first;
    }
    EXPECT_EQ(cells[18], "tensor");       // split_mode
    EXPECT_EQ(cells[22], "0.50/0.50");    // tensor_split
    EXPECT_EQ(cells[35], "cpu:0,cpu:1");  // devices
  }
  EXPECT_EQ(n_rows, 2);

  auto md = run("bench -m " + tiny_model() + " -p 8 -n 2 -r 1");
  EXPECT_NE(md.out.find("| model"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("pp8"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("tg2"), std::string::npos) << md.out;
  auto bad = run("bench -m " + tiny_model() + " -p 8,x", true);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("-p: 'x' is not a whole number"), std::string::npos) << bad.out;
}

// --roofline: the tg test's tokens in runs of 8, each beside the streaming reads around it; the
// runs' times add up to the sample, and the prompt test has none.
TEST(Cli, BenchRooflinePairsRunsOfTokensWithReads) {
  auto json = run("bench -m " + tiny_model() + " -p 4 -n 16 -r 2 -t 1 --roofline -o json");
  ASSERT_EQ(json.code, 0) << json.out;
  const nlohmann::json arr = nlohmann::json::parse(json.out);
  ASSERT_EQ(arr.size(), 2u);
  EXPECT_FALSE(arr[0].contains("roofline"));
  const nlohmann::json& tg = arr[1];
  expect_bench_record(tg, 2);
  ASSERT_TRUE(tg.contains("roofline")) << tg.dump();
  const nlohmann::json& roof = tg["roofline"];
  const auto bytes = roof["decode_bytes"].get<double>();
  EXPECT_GT(bytes, 0);
  EXPECT_LT(bytes, tg["model_size"].get<double>());  // not the embedding rows a token does not look up
  const auto& decode = roof["decode_gibs_samples"];
  const auto& read = roof["read_gibs_samples"];
  ASSERT_EQ(decode.size(), 4u);  // 2 repetitions x 16 / 8 tokens
  ASSERT_EQ(read.size(), 4u);
  for (int rep = 0; rep < 2; ++rep) {
    double seconds = 0;
    for (int i = 0; i < 2; ++i) {
      EXPECT_GT(read[rep * 2 + i].get<double>(), 0);
      seconds += 8 * bytes / (decode[rep * 2 + i].get<double>() * 1073741824.0);
    }
    EXPECT_NEAR(seconds, tg["samples_ns"][rep].get<double>() / 1e9, 1e-6 * seconds);
  }
  const double of_read = roof["of_read"].get<double>();
  EXPECT_GE(of_read, roof["of_read_p10"].get<double>());
  EXPECT_LE(of_read, roof["of_read_p90"].get<double>());

  auto md = run("bench -m " + tiny_model() + " -p 0 -n 8 -r 1 -t 1 --roofline");
  ASSERT_EQ(md.code, 0) << md.out;
  EXPECT_NE(md.out.find("| read GiB/s | of read (p10-p90) |"), std::string::npos) << md.out;
}

// llama.cpp's warning for a context past the training one; --log-disable silences it (and any
// progress line), wherever it stands.
TEST(Cli, ContextPastTrainingWarnsUnlessLogDisabled) {
  auto warned = run("run -m " + tiny_model() + " -p hi -n 1 --temp 0 -c 1024", true);
  EXPECT_EQ(warned.code, 0) << warned.out;
  EXPECT_NE(warned.out.find("n_ctx_per_seq (1024) > n_ctx_train (512) -- possible training context overflow"),
            std::string::npos)
      << warned.out;
  auto quiet = run("run -m " + tiny_model() + " -p hi -n 1 --temp 0 -c 1024 --log-disable", true);
  EXPECT_EQ(quiet.code, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("n_ctx_train"), std::string::npos) << quiet.out;
  auto within = run("run -m " + tiny_model() + " -p hi -n 1 --temp 0 -c 512", true);
  EXPECT_EQ(within.out.find("n_ctx_train"), std::string::npos) << within.out;
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroExit) {
  const std::string missing = "run -m /nonexistent.gguf -p hi";
  auto r = run(missing, true);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;

  const auto bad = std::filesystem::temp_directory_path() / "weft_cli_bad.gguf";
  std::ofstream(bad) << "GGUF this is not a model";
  r = run("run -m " + bad.string() + " -p hi", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("[gguf]"), std::string::npos) << r.out;

  if (std::filesystem::exists(kStories)) {
    for (const std::string flags :
         {"--devices cpu:0", "--devices gpu:1", "--devices cpu:1,cpu:1 -ts 1", "-ts 1,x --devices cpu:1,cpu:1",
          "-sm diagonal", "--devices cpu:1,cpu:1 -ts 0,0", "-c 4 -n 10", "-ctk q8_0"}) {
      r = run("run -m " + kStories + " -p \"Once upon a time\" --temp 0 " + flags, true);
      EXPECT_NE(r.code, 0) << flags << ": " << r.out;
      EXPECT_LT(r.code, 128) << flags << " crashed: " << r.out;
    }
  }
  r = run("frobnicate", true);
  EXPECT_NE(r.code, 0);
}

}  // namespace
