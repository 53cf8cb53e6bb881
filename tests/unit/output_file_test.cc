// formats/output_file and formats/input_file: where outputs go (stdout, devices, FIFOs, regular files
// through a temporary), the crash-safe result journal and its resume, and the line reader.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "formats/error.h"
#include "formats/input_file.h"
#include "formats/output_file.h"

namespace ftx {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ftx-output-file-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void write(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, ClassifiesEveryKindOfTarget) {
  EXPECT_EQ(classify_output("-").kind, OutputKind::kStdout);
  EXPECT_EQ(classify_output("/dev/null").kind, OutputKind::kDirect);  // a character device
  const OutputTarget fresh = classify_output(path("new.jsonl"));
  EXPECT_EQ(fresh.kind, OutputKind::kRegular);
  EXPECT_FALSE(fresh.exists);
  write(path("old.jsonl"), "x");
  EXPECT_TRUE(classify_output(path("old.jsonl")).exists);
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(classify_output(path("fifo")).kind, OutputKind::kDirect);
  fs::create_symlink(path("old.jsonl"), path("link"));
  const OutputTarget link = classify_output(path("link"));
  EXPECT_EQ(link.kind, OutputKind::kRegular);
  EXPECT_EQ(link.resolved, fs::canonical(path("old.jsonl")).string());
  fs::create_symlink(path("missing"), path("dangling"));
  EXPECT_THROW(classify_output(path("dangling")), Error);
  EXPECT_THROW(classify_output(dir_.string()), Error);
  EXPECT_THROW(classify_output(""), UsageError);
}

TEST_F(OutputFileTest, AtomicOutputAppearsOnlyWhenCommittedAndNeedsForce) {
  const std::string p = path("out.txt");
  {
    AtomicOutput out(p, false);
    out.write("hello\n");
    out.flush();
    EXPECT_FALSE(fs::exists(p));  // still under its temporary name
  }
  EXPECT_EQ(listing(), std::vector<std::string>{});  // an uncommitted output leaves nothing
  {
    AtomicOutput out(p, false);
    out.write("hello\n");
    out.commit();
  }
  EXPECT_EQ(read(p), "hello\n");
  EXPECT_THROW(AtomicOutput(p, false), Error);
  EXPECT_EQ(read(p), "hello\n");
  write_output_file(p, "again\n", true);
  EXPECT_EQ(read(p), "again\n");
  // Through a symlink: the target is replaced, the link stays a link.
  fs::create_symlink(p, path("link"));
  write_output_file(path("link"), "via link\n", true);
  EXPECT_TRUE(fs::is_symlink(path("link")));
  EXPECT_EQ(read(p), "via link\n");
}

TEST_F(OutputFileTest, JournalWritesPartialThenRenames) {
  const std::string p = path("res.jsonl");
  {
    ResultJournal j(p, {false, false, R"({"model":"a"})"});
    EXPECT_EQ(j.resumed(), 0);
    j.append("{\"index\":0}", 11);
    j.append("{\"index\":1}", 22);
    EXPECT_EQ(read(p + ".partial"), "{\"index\":0}\n{\"index\":1}\n");
    EXPECT_FALSE(fs::exists(p));
    j.finish();
  }
  EXPECT_EQ(read(p), "{\"index\":0}\n{\"index\":1}\n");
  EXPECT_EQ(listing(), std::vector<std::string>{"res.jsonl"});
  // An existing output needs --force (or --resume), and a finished one has nothing to resume.
  EXPECT_THROW(ResultJournal(p, {false, false, "{}"}), Error);
  EXPECT_THROW(ResultJournal(p, {false, true, "{}"}), Error);
  ResultJournal forced(p, {true, false, "{}"});
  forced.finish();
  EXPECT_EQ(read(p), "");
}

TEST_F(OutputFileTest, JournalResumesWhatACrashLeft) {
  const std::string p = path("res.jsonl");
  {
    ResultJournal j(p, {false, false, R"({"model":"a","text":true})"});
    j.append("line 0", 100);
    j.append("line 1", 101);
    j.append("line 2", 102);
  }  // the process "dies" here: no finish()
  ASSERT_TRUE(fs::exists(p + ".partial"));
  // A torn record and a record without its fingerprint are dropped.
  { std::ofstream(p + ".partial", std::ios::app) << "line 3\nline 4 is to"; }
  // Without --resume the leftover is refused (and kept).
  EXPECT_THROW(ResultJournal(p, {false, false, R"({"model":"a","text":true})"}), Error);
  EXPECT_EQ(read(p + ".partial"), "line 0\nline 1\nline 2\nline 3\nline 4 is to");
  // A different run is refused, naming what changed.
  try {
    ResultJournal(p, {false, true, R"({"model":"b","text":true})"});
    FAIL() << "a changed model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model: \"a\" then, \"b\" now"), std::string::npos) << e.what();
  }
  {
    ResultJournal j(p, {false, true, R"({"model":"a","text":true})"});
    ASSERT_EQ(j.resumed(), 3);
    EXPECT_EQ(j.fingerprint(0), 100u);
    EXPECT_EQ(j.fingerprint(2), 102u);
    std::vector<std::string> lines;
    j.for_each_resumed([&](int64_t i, const std::string& l) {
      EXPECT_EQ(i, static_cast<int64_t>(lines.size()));
      lines.push_back(l);
    });
    EXPECT_EQ(lines, (std::vector<std::string>{"line 0", "line 1", "line 2"}));
    j.append("line 3", 103);
    EXPECT_EQ(j.records(), 4);
    j.finish();
  }
  EXPECT_EQ(read(p), "line 0\nline 1\nline 2\nline 3\n");
  EXPECT_EQ(listing(), std::vector<std::string>{"res.jsonl"});
}

TEST_F(OutputFileTest, JournalRefusesABrokenIndexAndASecondWriter) {
  const std::string p = path("res.jsonl");
  {
    ResultJournal j(p, {false, false, "{}"});
    j.append("a", 1);
    // A second writer of the same .partial is refused while the first holds it.
    EXPECT_THROW(ResultJournal(p, {true, false, "{}"}), Error);
  }
  write(p + ".partial.index", "{\"ftx\":\"result-journal\",\"version\":1,\"run\":{}}\nnot-hex-at-all!!\n");
  EXPECT_THROW(ResultJournal(p, {false, true, "{}"}), Error);
  write(p + ".partial.index", "garbage\n");
  EXPECT_THROW(ResultJournal(p, {false, true, "{}"}), Error);
  fs::remove(p + ".partial.index");
  EXPECT_THROW(ResultJournal(p, {false, true, "{}"}), Error);
  // --force starts over.
  ResultJournal j(p, {true, false, "{}"});
  EXPECT_EQ(j.resumed(), 0);
}

TEST_F(OutputFileTest, JournalWithNothingWrittenLeavesNothing) {
  const std::string p = path("res.jsonl");
  { ResultJournal j(p, {false, false, "{}"}); }
  EXPECT_EQ(listing(), std::vector<std::string>{});
  // --resume with nothing to resume is a fresh run.
  ResultJournal j(p, {false, true, "{}"});
  EXPECT_EQ(j.resumed(), 0);
  j.append("x", 5);
  j.finish();
  EXPECT_EQ(read(p), "x\n");
}

TEST_F(OutputFileTest, JournalToADeviceIsDirectAndCannotResume) {
  EXPECT_THROW(ResultJournal("/dev/null", {false, true, "{}"}), UsageError);
  ResultJournal j("/dev/null", {false, false, "{}"});
  EXPECT_TRUE(j.direct());
  j.append("x", 1);
  j.finish();
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(OutputFileTest, LineReaderStreamsLinesWithNumbersAndPeeks) {
  const std::string p = path("in.txt");
  write(p, "one\r\ntwo\n\nlast");
  LineReader r(p);
  std::string l;
  ASSERT_TRUE(r.peek(l));
  EXPECT_EQ(l, "one");
  EXPECT_EQ(r.line_number(), 0);
  std::vector<std::string> got;
  while (r.next(l)) got.push_back(l + "@" + std::to_string(r.line_number()));
  EXPECT_EQ(got, (std::vector<std::string>{"one@1", "two@2", "@3", "last@4"}));
  EXPECT_FALSE(r.peek(l));
  EXPECT_THROW(LineReader(path("missing.txt")), Error);
  EXPECT_EQ(input_display_name("-"), "<stdin>");
}

TEST(Fingerprint, IsFnv1a64) {
  EXPECT_EQ(fingerprint64(std::string("")), 0xcbf29ce484222325ull);
  EXPECT_EQ(fingerprint64(std::string("a")), 0xaf63dc4c8601ec8cull);  // FNV-1a 64 test vector
  EXPECT_NE(fingerprint64(std::string("ab")), fingerprint64(std::string("ba")));
}

}  // namespace
}  // namespace ftx
