// Opcode-level tests of the safe unpickler with hand-written pickles. (In the C++ literals below a
// hex escape is closed by splitting the literal before any hex-digit character: "\x01" "a".)
#include "formats/pickle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "formats/error.h"

namespace ftx {
namespace {

using namespace std::string_literals;

ValuePtr U(const std::string& b, const PersistentLoader& loader = nullptr, size_t* consumed = nullptr) {
  return unpickle(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "test.pkl", loader, consumed);
}

// The message of the ftx::Error unpickling `b` throws ("" when it loads).
std::string error_of(const std::string& b, const PersistentLoader& loader = nullptr) {
  try {
    U(b, loader);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[k] = static_cast<char>(v >> (8 * k));
  return s;
}
std::string u64(uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[k] = static_cast<char>(v >> (8 * k));
  return s;
}

TEST(Pickle, Constants) {
  ValuePtr v = U("\x80\x02(N\x88\x89t."s);
  ASSERT_EQ(v->kind, Value::Kind::kTuple);
  ASSERT_EQ(v->items.size(), 3u);
  EXPECT_EQ(v->items[0]->kind, Value::Kind::kNone);
  EXPECT_TRUE(v->items[1]->b);
  EXPECT_FALSE(v->items[2]->b);
}

TEST(Pickle, Integers) {
  ValuePtr v = U("\x80\x02(J\xff\xff\xff\xffK\x07M\x00\x01\x8a\x01\xff\x8a\x02\x00\x80\x8a\x00t."s);
  ASSERT_EQ(v->items.size(), 6u);
  EXPECT_EQ(v->items[0]->i, -1);      // BININT
  EXPECT_EQ(v->items[1]->i, 7);       // BININT1
  EXPECT_EQ(v->items[2]->i, 256);     // BININT2
  EXPECT_EQ(v->items[3]->i, -1);      // LONG1, one byte
  EXPECT_EQ(v->items[4]->i, -32768);  // LONG1, two's complement
  EXPECT_EQ(v->items[5]->i, 0);       // LONG1, empty
  // 9 bytes that are sign extension still fit int64; 2**63 does not (approximated as float).
  EXPECT_EQ(U("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\xff."s)->i, std::numeric_limits<int64_t>::min());
  ValuePtr big = U("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."s);
  ASSERT_EQ(big->kind, Value::Kind::kFloat);
  EXPECT_EQ(big->f, 9223372036854775808.0);
  EXPECT_EQ(U("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f."s)->i, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(U("\x8b\x02\x00\x00\x00\x34\x12."s)->i, 0x1234);  // LONG4
  // Protocol 0 text forms.
  EXPECT_EQ(U("I42\n."s)->i, 42);
  EXPECT_EQ(U("I01\n."s)->kind, Value::Kind::kBool);
  EXPECT_EQ(U("L-5L\n."s)->i, -5);
}

TEST(Pickle, Floats) {
  // BINFLOAT is big-endian: 3f f8 00.. = 1.5
  EXPECT_EQ(U("G?\xf8\x00\x00\x00\x00\x00\x00."s)->f, 1.5);
  EXPECT_EQ(U("G\xc0\x09\x21\xfb\x54\x44\x2d\x18."s)->f, -3.141592653589793);
  EXPECT_EQ(U("F2.5\n."s)->f, 2.5);
}

TEST(Pickle, StringsAndBytes) {
  EXPECT_EQ(U("X\x03\x00\x00\x00" "abc."s)->str, "abc");             // BINUNICODE
  EXPECT_EQ(U("\x8c\x02" "ok."s)->str, "ok");                         // SHORT_BINUNICODE
  EXPECT_EQ(U("\x8d\x01\x00\x00\x00\x00\x00\x00\x00" "q."s)->str, "q");  // BINUNICODE8
  EXPECT_EQ(U("U\x02hi."s)->str, "hi");                               // SHORT_BINSTRING
  EXPECT_EQ(U("T\x01\x00\x00\x00z."s)->str, "z");                     // BINSTRING
  ValuePtr b = U("C\x02\x00\xff."s);                                   // SHORT_BINBYTES
  ASSERT_EQ(b->kind, Value::Kind::kBytes);
  EXPECT_EQ(b->str, "\x00\xff"s);
  EXPECT_EQ(U("B\x01\x00\x00\x00" "b."s)->kind, Value::Kind::kBytes);  // BINBYTES
  EXPECT_EQ(U("\x8e\x01\x00\x00\x00\x00\x00\x00\x00" "b."s)->str, "b");  // BINBYTES8
  EXPECT_EQ(U("\x96\x01\x00\x00\x00\x00\x00\x00\x00" "c."s)->str, "c");  // BYTEARRAY8
  EXPECT_EQ(U("S'it\\'s\\n'\n."s)->str, "it's\n");                    // STRING (protocol 0)
  EXPECT_EQ(U("Vcaf\\u00e9\n."s)->str, "caf\xc3\xa9");                // UNICODE (raw-unicode-escape)
  // Protocol 2 bytes: _codecs.encode(u'\xff', 'latin1')
  ValuePtr e = U("c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xbfU\x06latin1\x86R."s);
  ASSERT_EQ(e->kind, Value::Kind::kBytes);
  EXPECT_EQ(e->str, "\xff");
}

TEST(Pickle, Containers) {
  EXPECT_EQ(U("](K\x01K\x02" "e."s)->repr(), "[1, 2]");           // APPENDS
  EXPECT_EQ(U("]K\x05" "a."s)->repr(), "[5]");                  // APPEND
  EXPECT_EQ(U("(K\x01K\x02l."s)->repr(), "[1, 2]");            // LIST
  EXPECT_EQ(U(")."s)->repr(), "()");                            // EMPTY_TUPLE
  EXPECT_EQ(U("K\x01\x85."s)->repr(), "(1,)");                  // TUPLE1
  EXPECT_EQ(U("K\x01K\x02\x86."s)->repr(), "(1, 2)");          // TUPLE2
  EXPECT_EQ(U("K\x01K\x02K\x03\x87."s)->repr(), "(1, 2, 3)");  // TUPLE3
  EXPECT_EQ(U("(K\x01K\x02t."s)->repr(), "(1, 2)");            // TUPLE
  EXPECT_EQ(U("}(U\x01" "aK\x01U\x01" "bK\x02u."s)->repr(), "{'a': 1, 'b': 2}");  // SETITEMS
  EXPECT_EQ(U("}U\x01" "aK\x01s."s)->repr(), "{'a': 1}");      // SETITEM
  EXPECT_EQ(U("(U\x01" "aK\x01" "d."s)->repr(), "{'a': 1}");   // DICT
  EXPECT_EQ(U("\x8f(K\x01K\x02\x90."s)->repr(), "[1, 2]");     // EMPTY_SET + ADDITEMS (sets become lists)
  EXPECT_EQ(U("(K\x01\x91."s)->repr(), "[1]");                 // FROZENSET
  EXPECT_EQ(U("c__builtin__\nset\n](K\x01K\x02" "e\x85R."s)->repr(), "[1, 2]");  // protocol 2 set
  // Int keys (optimizer state) keep their kind.
  ValuePtr d = U("}K\x00" "K\x01s."s);
  EXPECT_EQ(d->dict[0].first->kind, Value::Kind::kInt);
}

TEST(Pickle, StackOps) {
  EXPECT_EQ(U("K\x01K\x02" "0."s)->i, 1);         // POP
  EXPECT_EQ(U("K\x01(K\x02K\x03" "1."s)->i, 1);   // POP_MARK
  EXPECT_EQ(U("K\x01(0."s)->i, 1);                // POP with nothing above the MARK pops the MARK
  EXPECT_EQ(U("K\x07" "2\x86."s)->repr(), "(7, 7)");  // DUP
}

TEST(Pickle, Memo) {
  ValuePtr v = U("]q\x00h\x00\x86."s);  // BINPUT / BINGET: the same object twice
  ASSERT_EQ(v->items.size(), 2u);
  EXPECT_EQ(v->items[0], v->items[1]);
  v = U("]r\x01\x00\x00\x00j\x01\x00\x00\x00\x86."s);  // LONG_BINPUT / LONG_BINGET
  EXPECT_EQ(v->items[0], v->items[1]);
  v = U("]p3\ng3\n\x86."s);  // PUT / GET
  EXPECT_EQ(v->items[0], v->items[1]);
  v = U("K\x01\x94" "]\x94" "0" "h\x01h\x00\x86."s);  // MEMOIZE numbers entries 0, 1, ...
  EXPECT_EQ(v->repr(), "([], 1)");
  EXPECT_NE(error_of("h\x05."s).find("test.pkl: corrupt pickle: BINGET of memo key 5 that was never stored at byte 0"),
            std::string::npos);
}

// A protocol 4 pickle: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, as Python writes it.
TEST(Pickle, Protocol4Frame) {
  const std::string body =
      "\x8c\x0b" "collections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94(\x8c\x01" "a\x94K\x01\x8c\x01" "b\x94"
      "\x88u."s;
  const std::string p = "\x80\x04\x95"s + u64(body.size()) + body;
  ValuePtr v = U(p);
  EXPECT_EQ(v->repr(), "{'a': 1, 'b': True}");
  // A FRAME claiming more bytes than there are is corrupt.
  EXPECT_NE(error_of("\x80\x04\x95"s + u64(1000) + body).find("FRAME of 1000 bytes runs past the end at byte 2"),
            std::string::npos);
  EXPECT_NE(error_of("\x80\x06N."s).find("unsupported protocol 6"), std::string::npos);
}

TEST(Pickle, NamespaceBecomesADictAndOrderedDictDropsItsMetadata) {
  EXPECT_EQ(U("cargparse\nNamespace\n)\x81}(U\x01" "aK\x01U\x01" "bU\x01" "xub."s)->repr(), "{'a': 1, 'b': 'x'}");
  // NEWOBJ_EX with keyword arguments
  EXPECT_EQ(U("cargparse\nNamespace\n)}U\x01" "aK\x02s\x92."s)->repr(), "{'a': 2}");
  // A state_dict: OrderedDict + BUILD {'_metadata': ...}
  EXPECT_EQ(U("ccollections\nOrderedDict\n)R(U\x01wK\x01u}U\t_metadata}sb."s)->repr(), "{'w': 1}");
}

TEST(Pickle, AllowedGlobals) {
  ValuePtr dt = U("ctorch\nbfloat16\n."s);
  EXPECT_EQ(dt->kind, Value::Kind::kDType);
  EXPECT_EQ(dt->str, "bfloat16");
  EXPECT_EQ(U("ctorch\nhalf\n."s)->str, "float16");
  EXPECT_EQ(U("ctorch\nSize\nK\x02K\x03\x86\x85R."s)->repr(), "(2, 3)");
  ValuePtr e = U("cmegatron.model.enums\nAttnMaskType\nK\x02\x85R."s);
  EXPECT_EQ(e->kind, Value::Kind::kObject);
  EXPECT_EQ(e->str, "megatron.model.enums.AttnMaskType");
  EXPECT_EQ(e->repr(), "<megatron.model.enums.AttnMaskType>");
  // Python >= 3.11 enum members: getattr(cls, 'name'), interpreted for opaque classes only.
  ValuePtr g = U("cbuiltins\ngetattr\ncmegatron.model.enums\nAttnMaskType\nU\x06" "causal\x86R."s);
  EXPECT_EQ(g->str, "megatron.model.enums.AttnMaskType");
  EXPECT_EQ(g->items.at(0)->str, "causal");
  EXPECT_NE(error_of("cbuiltins\ngetattr\nccollections\nOrderedDict\nU\x08" "fromkeys\x86R."s).find("refusing getattr"),
            std::string::npos);
  // numpy scalars decode; arrays and dtypes stay opaque (rng state).
  ValuePtr s = U("cnumpy.core.multiarray\nscalar\ncnumpy\ndtype\nU\x02" "f8\x89\x88\x87RC\x08\x00\x00\x00\x00\x00\x00\xf8?\x86R."s);
  EXPECT_EQ(s->kind, Value::Kind::kFloat);
  EXPECT_EQ(s->f, 1.5);
  ValuePtr i = U("cnumpy.core.multiarray\nscalar\ncnumpy\ndtype\nU\x02i8\x89\x88\x87RC\x08\xfe\xff\xff\xff\xff\xff\xff\xff\x86R."s);
  EXPECT_EQ(i->i, -2);
  ValuePtr a = U("cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" "C\x01" "b\x87R(K\x01)N\x89" "C\x00tb."s);
  EXPECT_EQ(a->str, "numpy.ndarray");
  // OmegaConf (best effort): DictConfig/AnyNode turn into the dict and value they wrap.
  ValuePtr o = U("comegaconf.dictconfig\nDictConfig\n)\x81}(U\x08_content}(U\x01" "a"
                 "comegaconf.nodes\nAnyNode\n)\x81}(U\x04_valK\x07ub" "uub."s);
  EXPECT_EQ(o->repr(), "{'a': 7}");
}

// TransformerEngine 1.x's _extra_state: an io.BytesIO (Python's own pickle of it, protocol 2)
// becomes an opaque object; its bytes are never unpickled. Other classes of _io stay refused.
TEST(Pickle, BytesIOIsAnOpaqueObject) {
  const std::string bytesio =
      "\x80\x02" "c_io\nBytesIO\nq\x00)\x81q\x01" "c_codecs\nencode\nq\x02X\x03\x00\x00\x00" "abcq\x03"
      "X\x06\x00\x00\x00latin1q\x04\x86q\x05Rq\x06K\x00N\x87q\x07" "b."s;
  ValuePtr v = U(bytesio);
  EXPECT_EQ(v->kind, Value::Kind::kObject);
  EXPECT_EQ(v->str, "_io.BytesIO");
  for (const std::string& g : {"_io\nFileIO"s, "_io\nopen"s, "io\nopen"s})
    EXPECT_NE(error_of("c" + g + "\n."), "") << g;
}

TEST(Pickle, RefusesGlobalsOutsideTheAllowList) {
  EXPECT_EQ(error_of("\x80\x02" "cos\nsystem\nU\x02hi\x85R."s),
            "test.pkl: refusing to load global 'os.system' (not in the allow-list)");
  for (const std::string& g : {"posix\nsystem"s, "builtins\neval"s, "__builtin__\nexec"s, "subprocess\nPopen"s,
                               "collections\nCounter"s, "__main__\nFoo"s, "torch\nload"s,
                               "torch.storage\n_load_from_bytes"s, "numpy\nload"s, "builtins\nsetattr"s,
                               "nt\nsystem"s}) {
    std::string dotted = g;
    dotted[dotted.find('\n')] = '.';
    if (dotted.rfind("__builtin__", 0) == 0) dotted.replace(0, 11, "builtins");
    EXPECT_EQ(error_of("c" + g + "\n."), "test.pkl: refusing to load global '" + dotted + "' (not in the allow-list)");
  }
  // STACK_GLOBAL and INST go through the same check.
  EXPECT_NE(error_of("\x8c\x08" "builtins\x8c\x04" "exec\x93."s).find("refusing to load global 'builtins.exec'"),
            std::string::npos);
  EXPECT_NE(error_of("(U\x02lsios\nsystem\n."s).find("refusing to load global 'os.system'"), std::string::npos);
  EXPECT_NE(error_of("\x82\x01."s).find("refusing to load extension code 1"), std::string::npos);
  EXPECT_NE(error_of("cos\x01x\nsystem\n."s).find("refusing to load global 'os?x.system'"), std::string::npos);
}

// A storage from the persistent loader, rebuilt into a strided view.
TEST(Pickle, PersistentIdsAndRebuildTensor) {
  static const float data[12] = {0};
  ValuePtr seen_pid;
  PersistentLoader loader = [&](const ValuePtr& pid) {
    seen_pid = pid;
    TensorView t;
    t.dtype = DType::kFloat32;
    t.shape = {12};
    t.storage.data = reinterpret_cast<const uint8_t*>(data);
    t.storage.nbytes = sizeof data;
    return Value::of_tensor(t);
  };
  const std::string p =
      "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((U\x07storagectorch\nFloatStorage\nU\x01" "0U\x03" "cpuK\x0ctQ"
      "K\x02K\x02K\x03\x86K\x01K\x02\x86\x89" "ccollections\nOrderedDict\n)RtR."s;
  ValuePtr v = U(p, loader);
  ASSERT_EQ(v->kind, Value::Kind::kTensor);
  EXPECT_EQ(v->tensor.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(v->tensor.strides, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v->tensor.offset, 2);
  EXPECT_EQ(v->tensor.dtype, DType::kFloat32);
  EXPECT_NO_THROW(v->tensor.validate("t"));
  ASSERT_TRUE(seen_pid);
  EXPECT_EQ(seen_pid->repr(), "('storage', <torch.FloatStorage>, '0', 'cpu', 12)");
  // _rebuild_parameter(tensor, requires_grad, hooks) is the tensor itself.
  ValuePtr param = U("ctorch._utils\n_rebuild_parameter\n(" + p.substr(2, p.size() - 3) + "\x88" "ccollections\nOrderedDict\n)RtR."s, loader);
  EXPECT_EQ(param->kind, Value::Kind::kTensor);
  // Text PERSID
  ValuePtr pid2;
  U("P123\n."s, [&](const ValuePtr& pid) { pid2 = pid; return Value::none(); });
  EXPECT_EQ(pid2->str, "123");
  EXPECT_NE(error_of("N\x85Q."s).find("persistent id in a pickle that allows none"), std::string::npos);
  // A rebuild whose first argument is not a storage, or whose size holds a non-int, is corrupt.
  EXPECT_NE(error_of("ctorch._utils\n_rebuild_tensor_v2\n(K\x01K\x00)))tR."s).find("not a storage"), std::string::npos);
  EXPECT_NE(error_of("ctorch._utils\n_rebuild_tensor_v2\n((U\x07storagectorch\nFloatStorage\nU\x01" "0U\x03" "cpuK\x0ctQ"
                     "K\x00U\x01x\x85K\x01\x85\x89NtR."s, loader)
                .find("size holds a str"),
            std::string::npos);
}

TEST(Pickle, CorruptInputs) {
  EXPECT_EQ(error_of("\xff"s), "test.pkl: corrupt pickle: unknown opcode 0xff at byte 0");
  EXPECT_EQ(error_of("a."s), "test.pkl: corrupt pickle: stack underflow in APPEND at byte 0");
  EXPECT_EQ(error_of("."s), "test.pkl: corrupt pickle: stack underflow in STOP at byte 0");
  EXPECT_EQ(error_of("K\x01"s), "test.pkl: corrupt pickle: data ends before STOP at byte 2");
  EXPECT_EQ(error_of("X\x05\x00\x00\x00" "ab"s),
            "test.pkl: corrupt pickle: truncated BINUNICODE (needs 5 bytes, 2 left) at byte 0");
  EXPECT_EQ(error_of(""s), "test.pkl: corrupt pickle: data ends before STOP at byte 0");
  EXPECT_NE(error_of("}(K\x01u."s).find("odd number of items"), std::string::npos);
  EXPECT_NE(error_of("K\x01K\x02u."s).find("no MARK before SETITEMS"), std::string::npos);
  EXPECT_NE(error_of("(]K\x01s."s).find("stack underflow in SETITEM"), std::string::npos);  // may not pop past a MARK
  EXPECT_NE(error_of("K\x01" "a."s).find("stack underflow"), std::string::npos);
  EXPECT_NE(error_of("K\x01K\x02" "a."s).find("APPEND on a int"), std::string::npos);
  EXPECT_NE(error_of("]N" "b."s).find("BUILD on a list"), std::string::npos);
  EXPECT_NE(error_of("K\x01)R."s).find("REDUCE on a int"), std::string::npos);
  EXPECT_NE(error_of("I12x\n."s).find("bad INT"), std::string::npos);
  EXPECT_NE(error_of("I12"s).find("unterminated INT"), std::string::npos);
}

TEST(Pickle, ConsumedCountsThroughStop) {
  const std::string two = "K\x01.K\x02."s;
  size_t used = 0;
  EXPECT_EQ(U(two, nullptr, &used)->i, 1);
  EXPECT_EQ(used, 3u);
  EXPECT_EQ(U(two.substr(used))->i, 2);
}

TEST(Pickle, SelfReferencesAreCutNotFollowed) {
  ValuePtr l = U("]q\x00h\x00" "a."s);  // l.append(l)
  ASSERT_EQ(l->items.size(), 1u);
  EXPECT_EQ(l->items[0]->kind, Value::Kind::kObject);
  EXPECT_EQ(l->repr(), "[<...>]");
  ValuePtr d = U("}q\x00U\x01" "ah\x00s."s);  // d['a'] = d
  EXPECT_EQ(d->repr(), "{'a': <...>}");
  // Cycles only reachable from the memo (not from the result) must not leak either (LSan checks).
  EXPECT_EQ(U("]q\x00h\x00" "a0K\x01."s)->i, 1);
  EXPECT_NE(error_of("]q\x00h\x00" "aX"s).find("corrupt pickle"), std::string::npos);
}

TEST(Pickle, DeepNestingIsRefused) {
  // l0 = [l1], l1 = [l2], ... built through the memo so the stack stays shallow.
  std::string p = "]r"s + u32(0);
  for (uint32_t k = 1; k <= 1100; ++k) p += "j"s + u32(k - 1) + "]r"s + u32(k) + "a0"s;
  p += "j"s + u32(0) + "."s;
  EXPECT_NE(error_of(p).find("containers nested deeper than 1000"), std::string::npos) << error_of(p);
  // 900 levels are fine.
  std::string ok = "]r"s + u32(0);
  for (uint32_t k = 1; k <= 900; ++k) ok += "j"s + u32(k - 1) + "]r"s + u32(k) + "a0"s;
  ok += "j"s + u32(0) + "."s;
  EXPECT_EQ(error_of(ok), "");
}

TEST(Pickle, ForwardedCallsNestOnlyAFewLevels) {
  std::string args = ")";
  for (int k = 0; k < 20; ++k) args = "(h\x00N"s + args + "Nt"s;
  const std::string p = "ctorch._tensor\n_rebuild_from_type_v2\nq\x00h\x00"s + args + "R."s;
  EXPECT_NE(error_of(p).find("forwards calls more than 8 levels deep"), std::string::npos) << error_of(p);
}

TEST(Pickle, SharedReferenceBombIsRefused) {
  std::string p = "]";
  for (int k = 0; k < 40; ++k) p += "2\x86";  // t = (t, t): 2**40 leaves when expanded
  p += ".";
  EXPECT_NE(error_of(p).find("shared references expand to more than"), std::string::npos);
}

// Every proper prefix of a valid pickle is an error, and no single-byte change crashes.
TEST(Pickle, TruncationAndByteFlipsNeverCrash) {
  PersistentLoader loader = [](const ValuePtr&) {
    TensorView t;
    t.shape = {12};
    return Value::of_tensor(t);
  };
  const std::string body =
      "}\x94(\x8c\x01w\x94" "ctorch._utils\n_rebuild_tensor_v2\n((U\x07storagectorch\nFloatStorage\nU\x01" "0U\x03"
      "cpuK\x0ctQK\x02K\x02K\x03\x86K\x01K\x02\x86\x89" "ccollections\nOrderedDict\n)RtR\x8c\x04" "args\x94"
      "cargparse\nNamespace\n)\x81}(U\x01" "aG?\xf8\x00\x00\x00\x00\x00\x00U\x01" "b\x8a\x02\x00\x80ub"
      "\x8c\x01l](h\x00h\x01X\x02\x00\x00\x00hiC\x01zeu."s;
  // Framed (protocol 4) and unframed (protocol 2) forms: a frame header alone catches most cuts.
  for (const std::string& p : {"\x80\x04\x95"s + u64(body.size()) + body, "\x80\x02"s + body}) {
    ASSERT_EQ(error_of(p, loader), "");
    for (size_t n = 0; n < p.size(); ++n) {
      const std::string msg = error_of(p.substr(0, n), loader);
      EXPECT_NE(msg.find("test.pkl: corrupt pickle: "), std::string::npos) << "prefix " << n << ": " << msg;
    }
    for (size_t k = 0; k < p.size(); ++k)
      for (int x : {0x01, 0x20, 0x80, 0xff}) {
        std::string c = p;
        c[k] = static_cast<char>(c[k] ^ x);
        error_of(c, loader);  // an Error or a value; anything else escapes and fails the test
      }
  }
}

}  // namespace
}  // namespace ftx
