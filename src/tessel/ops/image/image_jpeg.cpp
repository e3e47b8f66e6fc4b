// Baseline JPEG decoding for ImageDecoder.
//
// The reference outputs come from Pillow, i.e. libjpeg-turbo with its
// defaults, so this decoder follows the same integer arithmetic to be bit
// exact: the "islow" IDCT (13-bit fixed-point constants, two passes, the
// post-IDCT range-limit table), "fancy" triangle-filter upsampling for h2v1
// and h2v2 chroma, and the fixed-point YCbCr->RGB tables. Supported: baseline
// and extended sequential Huffman (SOF0/SOF1) with 8-bit samples, 1 or 3
// components, sampling h1v1/h2v1/h2v2 for chroma, restart intervals.
// Progressive, arithmetic-coded, 12-bit and CMYK files are refused.
#include <array>
#include <cstdint>
#include <vector>

#include "tessel/support/error.h"

namespace tessel {

// Decodes `data`; on success fills height, width, channels (1 or 3) and
// row-major 8-bit samples. Declared in image_decoder.cpp.
void decode_jpeg(const uint8_t* data, size_t n, int64_t* h, int64_t* w, int64_t* channels, std::vector<uint8_t>* px);

namespace {

constexpr int kZigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
                             41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
                             30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

struct HuffTable {
  bool defined = false;
  // Canonical code: for each length, the first code and the index of its first symbol.
  std::array<int, 17> count{}, first_code{}, first_index{};
  std::vector<uint8_t> symbols;
};

struct Component {
  int id = 0, h = 1, v = 1, tq = 0, td = 0, ta = 0;
  int64_t blocks_w = 0, blocks_h = 0;  // blocks per line / column, MCU-padded
  std::vector<int16_t> plane;          // blocks_w*8 x blocks_h*8 samples after IDCT
  int dc_pred = 0;
};

class JpegDecoder {
 public:
  JpegDecoder(const uint8_t* p, size_t n) : p_(p), n_(n) {}

  void run(int64_t* h, int64_t* w, int64_t* channels, std::vector<uint8_t>* px) {
    TS_CHECK(n_ >= 4 && p_[0] == 0xFF && p_[1] == 0xD8, "ImageDecoder: not a JPEG stream");
    pos_ = 2;
    bool frame = false, done = false;
    while (!done) {
      const int marker = next_marker();
      switch (marker) {
        case 0xC0: case 0xC1: read_frame(); frame = true; break;
        case 0xC2: case 0xC3: case 0xC5: case 0xC6: case 0xC7: case 0xC9: case 0xCA: case 0xCB:
        case 0xCD: case 0xCE: case 0xCF:
          fail("ImageDecoder: only baseline/sequential Huffman JPEG is supported");
        case 0xC4: read_dht(); break;
        case 0xDB: read_dqt(); break;
        case 0xDD: read_dri(); break;
        case 0xDA:
          TS_CHECK(frame, "ImageDecoder: JPEG scan before the frame header");
          read_scan();
          break;
        case 0xD9: done = true; break;
        default: skip_segment(); break;
      }
      if (marker == 0xDA && scans_done_ == static_cast<int>(comps_.size())) done = true;
    }
    TS_CHECK(frame && scans_done_ > 0, "ImageDecoder: JPEG has no image data");
    output(h, w, channels, px);
  }

 private:
  uint32_t u8(size_t at) const {
    TS_CHECK(at < n_, "ImageDecoder: truncated JPEG");
    return p_[at];
  }
  uint32_t be16(size_t at) const { return (u8(at) << 8) | u8(at + 1); }

  int next_marker() {
    while (u8(pos_) != 0xFF) ++pos_;  // tolerate junk between segments
    while (u8(pos_) == 0xFF) ++pos_;
    return static_cast<int>(u8(pos_++));
  }

  size_t segment(size_t* end) {
    const size_t len = be16(pos_);
    TS_CHECK(len >= 2, "ImageDecoder: bad JPEG segment length");
    *end = pos_ + len;
    TS_CHECK(*end <= n_, "ImageDecoder: truncated JPEG segment");
    return pos_ + 2;
  }
  void skip_segment() {
    size_t end;
    segment(&end);
    pos_ = end;
  }

  void read_frame() {
    size_t end, at = segment(&end);
    TS_CHECK(u8(at) == 8, "ImageDecoder: only 8-bit JPEG is supported");
    height_ = be16(at + 1);
    width_ = be16(at + 3);
    TS_CHECK(height_ > 0 && width_ > 0, "ImageDecoder: JPEG without explicit size is not supported");
    const int nc = static_cast<int>(u8(at + 5));
    TS_CHECK(nc == 1 || nc == 3, "ImageDecoder: only 1- or 3-component JPEG is supported");
    comps_.assign(static_cast<size_t>(nc), Component{});
    for (int i = 0; i < nc; ++i) {
      Component& c = comps_[static_cast<size_t>(i)];
      c.id = static_cast<int>(u8(at + 6 + 3 * i));
      c.h = static_cast<int>(u8(at + 7 + 3 * i) >> 4);
      c.v = static_cast<int>(u8(at + 7 + 3 * i) & 15);
      c.tq = static_cast<int>(u8(at + 8 + 3 * i));
      TS_CHECK(c.h >= 1 && c.h <= 2 && c.v >= 1 && c.v <= 2 && c.tq < 4, "ImageDecoder: unsupported JPEG sampling");
      hmax_ = std::max(hmax_, c.h);
      vmax_ = std::max(vmax_, c.v);
    }
    mcus_x_ = (width_ + 8 * hmax_ - 1) / (8 * hmax_);
    mcus_y_ = (height_ + 8 * vmax_ - 1) / (8 * vmax_);
    TS_CHECK(mcus_x_ * mcus_y_ <= (int64_t{1} << 22), "ImageDecoder: JPEG too large");
    for (Component& c : comps_) {
      c.blocks_w = mcus_x_ * c.h;
      c.blocks_h = mcus_y_ * c.v;
      c.plane.assign(static_cast<size_t>(c.blocks_w * 8 * c.blocks_h * 8), 0);
    }
    pos_ = end;
  }

  void read_dqt() {
    size_t end, at = segment(&end);
    while (at < end) {
      const uint32_t pq = u8(at) >> 4, tq = u8(at) & 15;
      TS_CHECK(tq < 4, "ImageDecoder: bad JPEG quantization table id");
      ++at;
      for (int k = 0; k < 64; ++k) {
        qt_[tq][static_cast<size_t>(kZigzag[k])] = static_cast<int>(pq ? be16(at + 2 * static_cast<size_t>(k)) : u8(at + static_cast<size_t>(k)));
      }
      at += pq ? 128 : 64;
    }
    pos_ = end;
  }

  void read_dht() {
    size_t end, at = segment(&end);
    while (at < end) {
      const uint32_t tc = u8(at) >> 4, th = u8(at) & 15;
      TS_CHECK(tc < 2 && th < 4, "ImageDecoder: bad JPEG Huffman table id");
      HuffTable& t = huff_[tc][th];
      t = HuffTable{};
      t.defined = true;
      int total = 0;
      for (int l = 1; l <= 16; ++l) {
        t.count[static_cast<size_t>(l)] = static_cast<int>(u8(at + static_cast<size_t>(l)));
        total += t.count[static_cast<size_t>(l)];
      }
      TS_CHECK(total <= 256, "ImageDecoder: bad JPEG Huffman table");
      int code = 0, index = 0;
      for (int l = 1; l <= 16; ++l) {
        t.first_code[static_cast<size_t>(l)] = code;
        t.first_index[static_cast<size_t>(l)] = index;
        code = (code + t.count[static_cast<size_t>(l)]) << 1;
        index += t.count[static_cast<size_t>(l)];
      }
      for (int i = 0; i < total; ++i) t.symbols.push_back(static_cast<uint8_t>(u8(at + 17 + static_cast<size_t>(i))));
      at += 17 + static_cast<size_t>(total);
    }
    pos_ = end;
  }

  void read_dri() {
    size_t end, at = segment(&end);
    restart_interval_ = static_cast<int>(be16(at));
    pos_ = end;
  }

  // ---- entropy decoding -----------------------------------------------------------

  int bit() {
    if (bitcnt_ == 0) {
      uint32_t b = 0;
      if (!hit_marker_) {
        b = u8(pos_);
        if (b == 0xFF) {
          const uint32_t next = u8(pos_ + 1);
          if (next == 0x00) {
            pos_ += 2;
          } else {
            hit_marker_ = true;  // a marker: feed zeros, as libjpeg does
            b = 0;
          }
        } else {
          ++pos_;
        }
      }
      bitbuf_ = b;
      bitcnt_ = 8;
    }
    --bitcnt_;
    return static_cast<int>((bitbuf_ >> bitcnt_) & 1);
  }

  int bits(int k) {
    int v = 0;
    for (int i = 0; i < k; ++i) v = (v << 1) | bit();
    return v;
  }

  // The signed value of a k-bit magnitude category.
  int extend(int v, int k) { return k == 0 ? 0 : v < (1 << (k - 1)) ? v - (1 << k) + 1 : v; }

  int decode(const HuffTable& t) {
    TS_CHECK(t.defined, "ImageDecoder: JPEG uses an undefined Huffman table");
    int code = 0;
    for (int l = 1; l <= 16; ++l) {
      code = (code << 1) | bit();
      const int off = code - t.first_code[static_cast<size_t>(l)];
      if (off >= 0 && off < t.count[static_cast<size_t>(l)])
        return t.symbols[static_cast<size_t>(t.first_index[static_cast<size_t>(l)] + off)];
    }
    fail("ImageDecoder: bad JPEG Huffman code");
  }

  void decode_block(Component& c, int64_t bx, int64_t by) {
    int coef[64] = {};
    const int s = decode(huff_[0][c.td]);
    TS_CHECK(s <= 11, "ImageDecoder: bad JPEG DC category");
    c.dc_pred += extend(bits(s), s);
    coef[0] = c.dc_pred;
    for (int k = 1; k < 64;) {
      const int rs = decode(huff_[1][c.ta]);
      const int r = rs >> 4, sz = rs & 15;
      if (sz == 0) {
        if (r != 15) break;  // end of block
        k += 16;
        continue;
      }
      k += r;
      TS_CHECK(k < 64, "ImageDecoder: JPEG coefficient index out of range");
      coef[kZigzag[k++]] = extend(bits(sz), sz);
    }
    idct(coef, qt_[static_cast<size_t>(c.tq)].data(), c, bx, by);
  }

  void read_scan() {
    size_t end, at = segment(&end);
    const int ns = static_cast<int>(u8(at));
    TS_CHECK(ns >= 1 && ns <= static_cast<int>(comps_.size()), "ImageDecoder: bad JPEG scan");
    std::vector<Component*> sc;
    for (int i = 0; i < ns; ++i) {
      const int id = static_cast<int>(u8(at + 1 + 2 * static_cast<size_t>(i)));
      Component* found = nullptr;
      for (Component& c : comps_)
        if (c.id == id) found = &c;
      TS_CHECK(found, "ImageDecoder: JPEG scan names an unknown component");
      found->td = static_cast<int>(u8(at + 2 + 2 * static_cast<size_t>(i)) >> 4);
      found->ta = static_cast<int>(u8(at + 2 + 2 * static_cast<size_t>(i)) & 15);
      TS_CHECK(found->td < 4 && found->ta < 4, "ImageDecoder: bad JPEG Huffman table id");
      sc.push_back(found);
    }
    pos_ = end;
    for (Component* c : sc) c->dc_pred = 0;
    bitcnt_ = 0;
    hit_marker_ = false;
    // A single-component scan covers that component's own blocks; an
    // interleaved one goes MCU by MCU.
    const bool single = ns == 1;
    const int64_t units_x = single ? (width_ * sc[0]->h / hmax_ + 7) / 8 : mcus_x_;
    const int64_t units_y = single ? (height_ * sc[0]->v / vmax_ + 7) / 8 : mcus_y_;
    int64_t count = 0;
    for (int64_t uy = 0; uy < units_y; ++uy) {
      for (int64_t ux = 0; ux < units_x; ++ux) {
        if (restart_interval_ && count > 0 && count % restart_interval_ == 0) restart(sc);
        ++count;
        if (single) {
          decode_block(*sc[0], ux, uy);
          continue;
        }
        for (Component* c : sc)
          for (int v = 0; v < c->v; ++v)
            for (int h = 0; h < c->h; ++h) decode_block(*c, ux * c->h + h, uy * c->v + v);
      }
    }
    scans_done_ += ns;
    // Continue after the entropy-coded data: find the next marker that is not RSTn.
    for (;;) {
      while (u8(pos_) != 0xFF) ++pos_;
      const uint32_t m = u8(pos_ + 1);
      if (m == 0x00 || (m >= 0xD0 && m <= 0xD7)) {
        pos_ += 2;
        continue;
      }
      break;
    }
  }

  void restart(const std::vector<Component*>& sc) {
    bitcnt_ = 0;
    hit_marker_ = false;
    // Expect RSTn next (possibly after fill bytes).
    while (u8(pos_) != 0xFF || u8(pos_ + 1) == 0x00) ++pos_;
    const uint32_t m = u8(pos_ + 1);
    TS_CHECK(m >= 0xD0 && m <= 0xD7, "ImageDecoder: missing JPEG restart marker");
    pos_ += 2;
    for (Component* c : sc) c->dc_pred = 0;
  }

  // ---- islow IDCT (13-bit constants, PASS1_BITS = 2) -----------------------------

  static int range_limit_idct(int64_t x) {
    // libjpeg's post-IDCT table indexed by x & 1023 around a centre of 128.
    const int64_t v = x & 1023;
    if (v < 128) return static_cast<int>(v + 128);
    if (v < 512) return 255;
    if (v < 896) return 0;
    return static_cast<int>(v - 896);
  }

  static int64_t descale(int64_t x, int n) { return (x + (int64_t{1} << (n - 1))) >> n; }

  void idct(const int* coef, const int* q, Component& c, int64_t bx, int64_t by) {
    constexpr int kConst = 13, kPass1 = 2;
    constexpr int64_t F0298 = 2446, F0390 = 3196, F0541 = 4433, F0765 = 6270, F0899 = 7373, F1175 = 9633,
                      F1501 = 12299, F1847 = 15137, F1961 = 16069, F2053 = 16819, F2562 = 20995, F3072 = 25172;
    int64_t ws[64];
    for (int col = 0; col < 8; ++col) {
      auto in = [&](int row) { return static_cast<int64_t>(coef[row * 8 + col]) * q[row * 8 + col]; };
      bool ac_zero = true;
      for (int row = 1; row < 8; ++row) ac_zero = ac_zero && coef[row * 8 + col] == 0;
      if (ac_zero) {
        const int64_t dc = in(0) * (1 << kPass1);
        for (int row = 0; row < 8; ++row) ws[row * 8 + col] = dc;
        continue;
      }
      int64_t z2 = in(2), z3 = in(6);
      int64_t z1 = (z2 + z3) * F0541;
      int64_t tmp2 = z1 + z3 * -F1847, tmp3 = z1 + z2 * F0765;
      z2 = in(0);
      z3 = in(4);
      int64_t tmp0 = (z2 + z3) * (1 << kConst), tmp1 = (z2 - z3) * (1 << kConst);
      const int64_t tmp10 = tmp0 + tmp3, tmp13 = tmp0 - tmp3, tmp11 = tmp1 + tmp2, tmp12 = tmp1 - tmp2;
      tmp0 = in(7);
      tmp1 = in(5);
      tmp2 = in(3);
      tmp3 = in(1);
      z1 = tmp0 + tmp3;
      z2 = tmp1 + tmp2;
      z3 = tmp0 + tmp2;
      int64_t z4 = tmp1 + tmp3;
      const int64_t z5 = (z3 + z4) * F1175;
      tmp0 *= F0298;
      tmp1 *= F2053;
      tmp2 *= F3072;
      tmp3 *= F1501;
      z1 *= -F0899;
      z2 *= -F2562;
      z3 *= -F1961;
      z4 *= -F0390;
      z3 += z5;
      z4 += z5;
      tmp0 += z1 + z3;
      tmp1 += z2 + z4;
      tmp2 += z2 + z3;
      tmp3 += z1 + z4;
      const int sh = kConst - kPass1;
      ws[0 * 8 + col] = descale(tmp10 + tmp3, sh);
      ws[7 * 8 + col] = descale(tmp10 - tmp3, sh);
      ws[1 * 8 + col] = descale(tmp11 + tmp2, sh);
      ws[6 * 8 + col] = descale(tmp11 - tmp2, sh);
      ws[2 * 8 + col] = descale(tmp12 + tmp1, sh);
      ws[5 * 8 + col] = descale(tmp12 - tmp1, sh);
      ws[3 * 8 + col] = descale(tmp13 + tmp0, sh);
      ws[4 * 8 + col] = descale(tmp13 - tmp0, sh);
    }
    const int64_t stride = c.blocks_w * 8;
    for (int row = 0; row < 8; ++row) {
      const int64_t* w = ws + row * 8;
      int64_t z2 = w[2], z3 = w[6];
      int64_t z1 = (z2 + z3) * F0541;
      int64_t tmp2 = z1 + z3 * -F1847, tmp3 = z1 + z2 * F0765;
      int64_t tmp0 = (w[0] + w[4]) * (1 << kConst), tmp1 = (w[0] - w[4]) * (1 << kConst);
      const int64_t tmp10 = tmp0 + tmp3, tmp13 = tmp0 - tmp3, tmp11 = tmp1 + tmp2, tmp12 = tmp1 - tmp2;
      tmp0 = w[7];
      tmp1 = w[5];
      tmp2 = w[3];
      tmp3 = w[1];
      z1 = tmp0 + tmp3;
      z2 = tmp1 + tmp2;
      z3 = tmp0 + tmp2;
      int64_t z4 = tmp1 + tmp3;
      const int64_t z5 = (z3 + z4) * F1175;
      tmp0 *= F0298;
      tmp1 *= F2053;
      tmp2 *= F3072;
      tmp3 *= F1501;
      z1 *= -F0899;
      z2 *= -F2562;
      z3 *= -F1961;
      z4 *= -F0390;
      z3 += z5;
      z4 += z5;
      tmp0 += z1 + z3;
      tmp1 += z2 + z4;
      tmp2 += z2 + z3;
      tmp3 += z1 + z4;
      const int sh = kConst + kPass1 + 3;
      int16_t* out = c.plane.data() + (by * 8 + row) * stride + bx * 8;
      out[0] = static_cast<int16_t>(range_limit_idct(descale(tmp10 + tmp3, sh)));
      out[7] = static_cast<int16_t>(range_limit_idct(descale(tmp10 - tmp3, sh)));
      out[1] = static_cast<int16_t>(range_limit_idct(descale(tmp11 + tmp2, sh)));
      out[6] = static_cast<int16_t>(range_limit_idct(descale(tmp11 - tmp2, sh)));
      out[2] = static_cast<int16_t>(range_limit_idct(descale(tmp12 + tmp1, sh)));
      out[5] = static_cast<int16_t>(range_limit_idct(descale(tmp12 - tmp1, sh)));
      out[3] = static_cast<int16_t>(range_limit_idct(descale(tmp13 + tmp0, sh)));
      out[4] = static_cast<int16_t>(range_limit_idct(descale(tmp13 - tmp0, sh)));
    }
  }

  // ---- upsampling and colour ------------------------------------------------------

  // Full-resolution rows of component c (width_ x height_), libjpeg's fancy
  // upsampling: a triangle filter with alternating rounding biases; rows
  // beyond the component's edges repeat the edge row.
  std::vector<int> upsample(const Component& c) const {
    const int64_t cw = (width_ * c.h + hmax_ - 1) / hmax_, ch = (height_ * c.v + vmax_ - 1) / vmax_;
    const int64_t stride = c.blocks_w * 8;
    auto at = [&](int64_t y, int64_t x) { return static_cast<int>(c.plane[static_cast<size_t>(y * stride + x)]); };
    const int fx = hmax_ / c.h, fy = vmax_ / c.v;
    std::vector<int> out(static_cast<size_t>(width_ * height_));
    std::vector<int> row(static_cast<size_t>(cw * fx));
    for (int64_t oy = 0; oy < height_; ++oy) {
      if (fy == 1) {
        const int64_t y = oy;
        if (fx == 1) {
          for (int64_t x = 0; x < cw; ++x) row[static_cast<size_t>(x)] = at(y, x);
        } else if (cw == 1) {
          row[0] = row[1] = at(y, 0);
        } else {
          // h2v1
          for (int64_t x = 0; x < cw; ++x) {
            const int v = at(y, x) * 3;
            const int left = x > 0 ? at(y, x - 1) : -1, right = x + 1 < cw ? at(y, x + 1) : -1;
            row[static_cast<size_t>(2 * x)] = x == 0 ? at(y, x) : (v + left + 1) >> 2;
            row[static_cast<size_t>(2 * x + 1)] = x + 1 == cw ? at(y, x) : (v + right + 2) >> 2;
          }
        }
      } else {
        TS_CHECK(fx == 2, "ImageDecoder: JPEG h1v2 chroma sampling is not supported");
        // h2v2: the nearer row weighs 3, the next nearest (above for the top
        // output row of a pair, below for the bottom one) weighs 1.
        const int64_t y = oy / 2;
        const int64_t y2 = std::min(std::max(oy % 2 == 0 ? y - 1 : y + 1, int64_t{0}), ch - 1);
        auto colsum = [&](int64_t x) { return at(y, x) * 3 + at(y2, x); };
        if (cw == 1) {
          row[0] = (colsum(0) * 4 + 8) >> 4;
          row[1] = (colsum(0) * 4 + 7) >> 4;
        } else {
          for (int64_t x = 0; x < cw; ++x) {
            const int thisc = colsum(x);
            row[static_cast<size_t>(2 * x)] = x == 0 ? (thisc * 4 + 8) >> 4 : (thisc * 3 + colsum(x - 1) + 8) >> 4;
            row[static_cast<size_t>(2 * x + 1)] = x + 1 == cw ? (thisc * 4 + 7) >> 4 : (thisc * 3 + colsum(x + 1) + 7) >> 4;
          }
        }
      }
      for (int64_t x = 0; x < width_; ++x) out[static_cast<size_t>(oy * width_ + x)] = row[static_cast<size_t>(x)];
    }
    return out;
  }

  void output(int64_t* h, int64_t* w, int64_t* channels, std::vector<uint8_t>* px) const {
    *h = height_;
    *w = width_;
    const int64_t npx = height_ * width_;
    if (comps_.size() == 1) {
      *channels = 1;
      px->resize(static_cast<size_t>(npx));
      const Component& c = comps_[0];
      for (int64_t y = 0; y < height_; ++y)
        for (int64_t x = 0; x < width_; ++x)
          (*px)[static_cast<size_t>(y * width_ + x)] = static_cast<uint8_t>(c.plane[static_cast<size_t>(y * c.blocks_w * 8 + x)]);
      return;
    }
    TS_CHECK(comps_[0].h == hmax_ && comps_[0].v == vmax_, "ImageDecoder: subsampled JPEG luma is not supported");
    const std::vector<int> Y = upsample(comps_[0]), Cb = upsample(comps_[1]), Cr = upsample(comps_[2]);
    // Fixed-point YCbCr -> RGB with 16 fractional bits, as libjpeg's tables.
    constexpr int64_t kHalf = int64_t{1} << 15;
    constexpr int64_t FR = 91881, FB = 116130, FGR = 46802, FGB = 22554;
    auto clamp = [](int64_t v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); };
    *channels = 3;
    px->resize(static_cast<size_t>(npx * 3));
    for (int64_t i = 0; i < npx; ++i) {
      const int64_t y = Y[static_cast<size_t>(i)], cb = Cb[static_cast<size_t>(i)] - 128, cr = Cr[static_cast<size_t>(i)] - 128;
      const int64_t r_off = (FR * cr + kHalf) >> 16, b_off = (FB * cb + kHalf) >> 16;
      const int64_t g_off = (-FGB * cb + kHalf - FGR * cr) >> 16;
      (*px)[static_cast<size_t>(i * 3)] = clamp(y + r_off);
      (*px)[static_cast<size_t>(i * 3 + 1)] = clamp(y + g_off);
      (*px)[static_cast<size_t>(i * 3 + 2)] = clamp(y + b_off);
    }
  }

  const uint8_t* p_;
  size_t n_, pos_ = 0;
  int64_t width_ = 0, height_ = 0, mcus_x_ = 0, mcus_y_ = 0;
  int hmax_ = 1, vmax_ = 1, restart_interval_ = 0, scans_done_ = 0;
  std::vector<Component> comps_;
  std::array<std::array<int, 64>, 4> qt_{};
  HuffTable huff_[2][4];
  uint32_t bitbuf_ = 0;
  int bitcnt_ = 0;
  bool hit_marker_ = false;
};

}  // namespace

void decode_jpeg(const uint8_t* data, size_t n, int64_t* h, int64_t* w, int64_t* channels, std::vector<uint8_t>* px) {
  JpegDecoder(data, n).run(h, w, channels, px);
}

}  // namespace tessel
