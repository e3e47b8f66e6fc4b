#include "tessel/driver/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tessel/support/error.h"

namespace tessel {
namespace {

std::string header_of(const std::vector<uint8_t>& b) {
  const size_t len = b[8] | (size_t{b[9]} << 8);
  return std::string(reinterpret_cast<const char*>(b.data() + 10), len);
}

Tensor round_trip(const Tensor& t) {
  const auto bytes = npy_encode(t);
  return npy_decode(bytes.data(), bytes.size(), t.dtype());
}

// Builds .npy bytes by hand (as NumPy would write them).
std::vector<uint8_t> make_npy(const std::string& dict, const std::vector<uint8_t>& data, int major = 1) {
  std::string h = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h.push_back(' ');
  h.push_back('\n');
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(static_cast<uint8_t>(h.size() >> (8 * i)));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

TEST(Npy, HeaderIsNumpyVersion1Aligned) {
  Tensor t(DType::F32, {2, 3});
  const auto b = npy_encode(t);
  EXPECT_EQ(b[6], 1);
  EXPECT_EQ(b[7], 0);
  const std::string h = header_of(b);
  EXPECT_EQ((10 + h.size()) % 64, 0u);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(h.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(h.find("'fortran_order': False"), std::string::npos);
  EXPECT_NE(h.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_EQ(b.size(), 10 + h.size() + 24);
}

TEST(Npy, ShapesOfRank0And1) {
  EXPECT_NE(header_of(npy_encode(Tensor(DType::I64, {}))).find("'shape': ()"), std::string::npos);
  EXPECT_NE(header_of(npy_encode(Tensor(DType::I64, {5}))).find("'shape': (5,)"), std::string::npos);
}

TEST(Npy, DescrPerDtype) {
  EXPECT_EQ(npy_descr_for(DType::F32), "<f4");
  EXPECT_EQ(npy_descr_for(DType::F16), "<f2");
  EXPECT_EQ(npy_descr_for(DType::F64), "<f8");
  EXPECT_EQ(npy_descr_for(DType::Bool), "|b1");
  EXPECT_EQ(npy_descr_for(DType::I8), "|i1");
  EXPECT_EQ(npy_descr_for(DType::U64), "<u8");
  EXPECT_EQ(npy_descr_for(DType::BF16), "|V2");
  EXPECT_EQ(npy_descr_for(DType::F8E4M3FN), "|V1");
  EXPECT_EQ(npy_descr_for(DType::I4), "|V1");
  EXPECT_EQ(npy_descr_for(DType::U2), "|V1");
  EXPECT_EQ(npy_descr_for(DType::F4E2M1), "|V1");
}

TEST(Npy, RoundTripEveryNumericDtype) {
  const DType all[] = {DType::F32, DType::U8, DType::I8, DType::U16, DType::I16, DType::I32, DType::I64,
                       DType::Bool, DType::F16, DType::F64, DType::U32, DType::U64, DType::BF16,
                       DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::U4,
                       DType::I4, DType::F4E2M1, DType::F8E8M0, DType::U2, DType::I2};
  for (DType dt : all) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor t(dt, {2, 3});
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dt == DType::Bool) t.set_i64(i, i % 2);
      else if (dt == DType::I2) t.set_i64(i, i % 4 - 2);
      else if (dt == DType::I4) t.set_i64(i, i - 3);
      else if (is_float(dt)) t.set_f64(i, 0.5 * static_cast<double>(i));
      else t.set_i64(i, i);
    }
    const Tensor r = round_trip(t);
    EXPECT_TRUE(r.bitwise_equal(t));
  }
}

TEST(Npy, StringsAreUtf32) {
  Tensor t(DType::String, {3});
  t.mutable_strings() = {"a", "h\xC3\xA9llo", ""};
  const auto b = npy_encode(t);
  EXPECT_NE(header_of(b).find("'descr': '<U5'"), std::string::npos);
  const size_t data = 10 + header_of(b).size();
  ASSERT_EQ(b.size(), data + 3 * 5 * 4);
  EXPECT_EQ(b[data], 'a');
  EXPECT_EQ(b[data + 20 + 4], 0xE9);  // é as one UTF-32 code unit
  const Tensor r = round_trip(t);
  EXPECT_EQ(r.strings(), t.strings());
}

TEST(Npy, EmptyStringArrayHasWidthOne) {
  Tensor t(DType::String, {0});
  EXPECT_NE(header_of(npy_encode(t)).find("'<U1'"), std::string::npos);
  EXPECT_EQ(round_trip(t).numel(), 0);
}

TEST(Npy, ReadsByteStringsAndBigEndianAndFortran) {
  auto s = make_npy("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", {'a', 'b', 0, 'x', 'y', 'z'});
  Tensor t = npy_decode(s.data(), s.size(), DType::String);
  EXPECT_EQ(t.strings(), (std::vector<std::string>{"ab", "xyz"}));

  auto be = make_npy("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", {0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE});
  t = npy_decode(be.data(), be.size());
  EXPECT_EQ(t.dtype(), DType::I32);
  EXPECT_EQ(t.get_i64(0), 258);
  EXPECT_EQ(t.get_i64(1), -2);

  // Fortran order [[0,1,2],[3,4,5]] is stored column by column: 0 3 1 4 2 5.
  auto f = make_npy("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", {0, 3, 1, 4, 2, 5});
  t = npy_decode(f.data(), f.size());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t.get_i64(i), i);

  auto v2 = make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", std::vector<uint8_t>(8, 0), 2);
  t = npy_decode(v2.data(), v2.size());
  EXPECT_EQ(t.rank(), 0u);
}

TEST(Npy, RawDataNeedsDeclaredDtype) {
  auto b = make_npy("{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }", {0x80, 0x3F});
  EXPECT_THROW(npy_decode(b.data(), b.size()), Error);
  Tensor t = npy_decode(b.data(), b.size(), DType::BF16);
  EXPECT_EQ(t.get_f64(0), 1.0);
  EXPECT_THROW(npy_decode(b.data(), b.size(), DType::F32), Error);  // V2 is not f32
  EXPECT_THROW(npy_decode(b.data(), b.size(), DType::I4), Error);   // wrong size
}

TEST(Npy, SubByteValuesUseTheMlDtypesLayout) {
  // ml_dtypes writes int4 -1 as 0x0F and -8 as 0x08; sign-extended bytes are
  // accepted too; anything else is not an int4.
  auto b = make_npy("{'descr': '|V1', 'fortran_order': False, 'shape': (4,), }", {7, 8, 0x0F, 0xF8});
  Tensor t = npy_decode(b.data(), b.size(), DType::I4);
  EXPECT_EQ(t.get_i64(0), 7);
  EXPECT_EQ(t.get_i64(1), -8);
  EXPECT_EQ(t.get_i64(2), -1);
  EXPECT_EQ(t.get_i64(3), -8);
  EXPECT_EQ(t.raw()[2], 0xFF);  // tessel storage is sign-extended
  // Written back in the ml_dtypes layout.
  const auto out = npy_encode(t);
  const size_t data = out.size() - 4;
  EXPECT_EQ(out[data + 2], 0x0F);
  EXPECT_EQ(out[data + 3], 0x08);

  auto bad = make_npy("{'descr': '|V1', 'fortran_order': False, 'shape': (2,), }", {7, 0x18});
  EXPECT_THROW(npy_decode(bad.data(), bad.size(), DType::I4), Error);
  EXPECT_THROW(npy_decode(bad.data(), bad.size(), DType::U4), Error);
  auto i2 = make_npy("{'descr': '|V1', 'fortran_order': False, 'shape': (2,), }", {3, 1});
  t = npy_decode(i2.data(), i2.size(), DType::I2);
  EXPECT_EQ(t.get_i64(0), -1);
  EXPECT_EQ(t.get_i64(1), 1);
}

TEST(Npy, DtypeMismatchIsAnError) {
  const auto b = npy_encode(Tensor(DType::F64, {2}));
  try {
    npy_decode(b.data(), b.size(), DType::F32);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
  }
}

TEST(Npy, HostileInputs) {
  auto ok = npy_encode(Tensor(DType::F32, {4}));
  // Truncated everywhere.
  for (size_t n = 0; n < ok.size(); ++n) EXPECT_THROW(npy_decode(ok.data(), n), Error) << n;
  // Trailing garbage.
  auto extra = ok;
  extra.push_back(0);
  EXPECT_THROW(npy_decode(extra.data(), extra.size()), Error);
  // Huge shapes do not allocate.
  auto huge = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", {});
  EXPECT_THROW(npy_decode(huge.data(), huge.size()), Error);
  auto big = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }", {});
  EXPECT_THROW(npy_decode(big.data(), big.size()), Error);
  // Unsupported kinds.
  for (const char* d : {"|O", "<c8", "<M8[ns]"}) {
    auto o = make_npy(std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (1,), }",
                      std::vector<uint8_t>(8, 0));
    EXPECT_THROW(npy_decode(o.data(), o.size()), Error) << d;
  }
  auto structured = make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0});
  EXPECT_THROW(npy_decode(structured.data(), structured.size()), Error);
  auto bad_bool = make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", {2});
  EXPECT_THROW(npy_decode(bad_bool.data(), bad_bool.size()), Error);
  EXPECT_THROW(read_npy_file("/nonexistent/x.npy"), Error);
}

}  // namespace
}  // namespace tessel
