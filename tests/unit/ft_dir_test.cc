// config.ini parsing with inih's semantics, write_file's error checks, OutputDir's commit protocol,
// and how an output path relates to an input (formats/path_relation.h).
#include "formats/ft_dir.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "formats/error.h"
#include "formats/path_relation.h"
#include "unit/format_fixtures.h"

using namespace ftx;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A fresh scratch folder per test.
class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/ft_dir_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void touch(const std::string& p, const std::string& text) { std::ofstream(p) << text; }
  std::string root_;
};

}  // namespace

TEST(IniFile, InihSemantics) {
  const std::string text =
      "; leading comment\n"
      "# hash comment\n"
      "[GPT]\n"
      "Head_Num = 16 ; inline comment after a space\n"
      "weight_data_type=fp16;not a comment\n"
      "tensor_para_size : 2\n"
      "  \n"
      "dup = a\n"
      "DUP = b\n"
      "multi = first\n"
      "   second\n"
      "[other]\n"
      "x = 1\n"
      "[gpt]\n"
      "late = yes\n";
  IniFile ini = IniFile::parse(text, "config.ini");
  EXPECT_EQ(ini.get("gpt", "head_num"), "16");
  EXPECT_EQ(ini.get("Gpt", "HEAD_NUM"), "16");
  EXPECT_EQ(ini.get_int("gpt", "head_num"), 16);
  EXPECT_EQ(ini.get("gpt", "weight_data_type"), "fp16;not a comment");
  EXPECT_EQ(ini.get_int("gpt", "tensor_para_size"), 2);
  EXPECT_EQ(ini.get("gpt", "dup"), "a\nb");
  EXPECT_EQ(ini.get("gpt", "multi"), "first\nsecond");
  EXPECT_TRUE(ini.get_bool_or("gpt", "late", false));
  EXPECT_EQ(ini.sections(), (std::vector<std::string>{"GPT", "other"}));
  EXPECT_TRUE(ini.has_section("OTHER"));
  EXPECT_FALSE(ini.has("gpt", "x"));
  EXPECT_EQ(ini.get_or("gpt", "missing", "d"), "d");
  EXPECT_EQ(ini.get_int_or("gpt", "missing", 7), 7);
  EXPECT_DOUBLE_EQ(ini.get_double_or("other", "x", 0), 1.0);
}

TEST(IniFile, ErrorsNameFileKeyAndLine) {
  IniFile ini = IniFile::parse("[gpt]\nhead_num = 16x\nflag = maybe\neps = 1e-5\nbig = 99999999999999999999\n", "c.ini");
  EXPECT_EQ(error_of([&] { ini.get_int("gpt", "head_num"); }), "c.ini: [gpt] head_num = '16x' is not an integer");
  EXPECT_EQ(error_of([&] { ini.get_int("gpt", "big"); }), "c.ini: [gpt] big = '99999999999999999999' is not an integer");
  EXPECT_NE(error_of([&] { ini.get_bool_or("gpt", "flag", true); }).find("c.ini: [gpt] flag = 'maybe' is not a boolean"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { ini.get("gpt", "nope"); }), "c.ini: missing key 'nope' in section [gpt]");
  EXPECT_EQ(error_of([&] { ini.get_double("gpt", "head_num"); }), "c.ini: [gpt] head_num = '16x' is not a number");
  EXPECT_DOUBLE_EQ(ini.get_double("gpt", "eps"), 1e-5);
  EXPECT_EQ(error_of([] { IniFile::parse("[gpt]\nok = 1\njust words\n", "c.ini"); }),
            "c.ini: line 3: expected 'key = value' or '[section]', got 'just words'");
  EXPECT_NE(error_of([] { IniFile::parse("[gpt\n", "c.ini"); }).find("c.ini: line 1: section header without ']'"),
            std::string::npos);
  EXPECT_NE(error_of([] { IniFile::read("/nonexistent/config.ini"); }).find("/nonexistent/config.ini: cannot open"),
            std::string::npos);
}

TEST_F(ScratchDir, IniWriteLooksLikeConfigparserAndReadsBack) {
  IniFile ini;
  ini.set("gpt", "model_name", "gpt");
  ini.set("gpt", "head_num", "16");
  ini.set("structure", "gpt_with_moe", "0");
  ini.set("gpt", "HEAD_NUM", "32");  // replaces, case-insensitively, in place
  EXPECT_EQ(ini.to_string(), "[gpt]\nmodel_name = gpt\nhead_num = 32\n\n[structure]\ngpt_with_moe = 0\n\n");
  ini.set("gpt", "lines", "a\nb");
  ini.write(root_ + "/config.ini");
  IniFile back = IniFile::read(root_ + "/config.ini");
  EXPECT_EQ(back.get("gpt", "lines"), "a\nb");
  EXPECT_EQ(back.get_int("gpt", "head_num"), 32);
  EXPECT_EQ(back.path(), root_ + "/config.ini");
}

TEST_F(ScratchDir, WriteFileWritesAndNamesOpenErrors) {
  const std::string data = "hello";
  write_file(root_ + "/a.bin", data.data(), data.size());
  EXPECT_EQ(ftx_test::read_all(root_ + "/a.bin"), data);
  EXPECT_NE(error_of([&] { write_file(root_ + "/no/such/dir/a.bin", "x", 1); }).find("cannot create"), std::string::npos);
}

TEST(WriteFile, DevFullIsNoSpace) {
  if (!ftx_test::file_exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  std::vector<char> buf(1 << 16, 'x');
  EXPECT_EQ(error_of([&] { write_file("/dev/full", buf.data(), buf.size()); }),
            "/dev/full: write failed: No space left on device");
}

TEST_F(ScratchDir, WriteFileOnAFullTmpfsIsNoSpace) {
  const std::string mnt = root_ + "/small";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a 64k tmpfs here (" << std::strerror(errno) << "); /dev/full covers ENOSPC";
  std::vector<char> buf(1 << 20, 'x');
  const std::string path = mnt + "/big.bin";
  const std::string err = error_of([&] { write_file(path, buf.data(), buf.size()); });
  ::umount2(mnt.c_str(), MNT_DETACH);
  EXPECT_EQ(err, path + ": write failed: No space left on device");
}

TEST_F(ScratchDir, OutputDirCommitRenamesIntoPlace) {
  const std::string final_path = root_ + "/deep/er/out/1-gpu";
  {
    OutputDir out(final_path, false);
    EXPECT_EQ(out.tmp_path(), root_ + "/deep/er/out/.1-gpu.tmp-" + std::to_string(::getpid()));
    write_file(out.file("x.bin"), "abc", 3);
    EXPECT_FALSE(fs::exists(final_path));
    out.commit();
  }
  EXPECT_EQ(ftx_test::read_all(final_path + "/x.bin"), "abc");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ + "/deep/er/out"), fs::directory_iterator()), 1);
}

TEST_F(ScratchDir, OutputDirRefusesExistingWithoutForce) {
  const std::string final_path = root_ + "/out";
  fs::create_directories(final_path);
  touch(final_path + "/keep.txt", "old");
  EXPECT_EQ(error_of([&] { OutputDir out(final_path + "/", false); }),
            final_path + " exists; use --force to overwrite");
  EXPECT_EQ(ftx_test::read_all(final_path + "/keep.txt"), "old");
  // Appearing between construction and commit is refused too.
  const std::string later = root_ + "/later";
  OutputDir out(later, false);
  fs::create_directories(later);
  EXPECT_EQ(error_of([&] { out.commit(); }), later + " exists; use --force to overwrite");
}

TEST_F(ScratchDir, OutputDirForceReplacesOnlyAtCommit) {
  const std::string final_path = root_ + "/out";
  fs::create_directories(final_path);
  touch(final_path + "/old.txt", "old");
  {
    OutputDir out(final_path, true);
    write_file(out.file("new.txt"), "new", 3);
    EXPECT_TRUE(fs::exists(final_path + "/old.txt"));  // untouched until commit
    out.commit();
  }
  EXPECT_FALSE(fs::exists(final_path + "/old.txt"));
  EXPECT_EQ(ftx_test::read_all(final_path + "/new.txt"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);  // no .old-/.tmp- left
}

TEST_F(ScratchDir, OutputDirRemovesUncommittedFolderOnException) {
  const std::string final_path = root_ + "/out";
  std::string tmp;
  try {
    OutputDir out(final_path, false);
    tmp = out.tmp_path();
    fs::create_directories(out.file("sub/dir"));
    write_file(out.file("sub/dir/x.bin"), "abc", 3);
    throw Error("conversion failed");
  } catch (const Error&) {
  }
  EXPECT_FALSE(tmp.empty());
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_FALSE(fs::exists(final_path));
}

// Containment is by whole components, and a path's own spelling (trailing slash, "..") does not matter.
TEST(PathRelation, T1_WithinComparesWholeComponents) {
  EXPECT_TRUE(path_within("/a/b", "/a/b"));
  EXPECT_TRUE(path_within("/a/b/c", "/a/b"));
  EXPECT_TRUE(path_within("/a/b", "/"));
  EXPECT_FALSE(path_within("/a/bc", "/a/b"));
  EXPECT_FALSE(path_within("/a", "/a/b"));
}

// Symbolic links are resolved, also in the parent of a path that does not exist yet: a model
// folder reached through a link lies inside the folder the link leads to (T-1, T-2, T30).
TEST_F(ScratchDir, T1_ResolvedPathFollowsLinksToTheNearestExistingParent) {
  const std::string real = fs::canonical(root_).string();
  fs::create_directories(root_ + "/x/1-gpu");
  fs::create_directory_symlink(root_ + "/x", root_ + "/link");
  EXPECT_EQ(resolved_path(root_ + "/link/1-gpu/"), real + "/x/1-gpu");
  EXPECT_EQ(resolved_path(root_ + "/link/new/deeper"), real + "/x/new/deeper");
  EXPECT_EQ(resolved_path(root_ + "/x/2-gpu/../1-gpu"), real + "/x/1-gpu");
  EXPECT_TRUE(path_within(resolved_path(root_ + "/x/1-gpu"), resolved_path(root_ + "/link")));
  EXPECT_TRUE(path_within(resolved_path(root_ + "/link/1-gpu/repo"), resolved_path(root_ + "/x/1-gpu")));
}

// A TransientDir's tree is gone when its scope ends, also when the scope ends by an exception.
TEST_F(ScratchDir, TransientDirRemovesItsTreeOnEveryExit) {
  const std::string p = root_ + "/transient";
  {
    const TransientDir t(p);
    std::filesystem::create_directories(p + "/a/b");
    std::ofstream(p + "/a/b/f.bin") << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(p));
  try {
    const TransientDir t(p);
    std::filesystem::create_directories(p + "/c");
    throw Error(p, "boom");
  } catch (const Error&) {
  }
  EXPECT_FALSE(std::filesystem::exists(p));
  { const TransientDir never_made(p + "/missing"); }  // a path that was never created is no error
}
