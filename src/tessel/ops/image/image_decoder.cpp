// ImageDecoder: decodes an encoded image (1-D uint8) into [H, W, 3] RGB or
// BGR, or [H, W, 1] grayscale.
//
// Only the formats a small, exact decoder can handle are supported: BMP
// (uncompressed 24/32-bit), PNM (P5/P6, maxval <= 255), TIFF (uncompressed,
// 8-bit, gray or chunky RGB/RGBA), PNG (8-bit, non-interlaced, every colour
// type; a small inflate is included) and baseline JPEG (image_jpeg.cpp,
// following libjpeg-turbo's default integer pipeline, which the reference
// outputs come from). Progressive JPEG, JPEG 2000 and WebP are refused with
// an Error. Alpha is dropped. Grayscale from colour uses the ITU-R 601 luma
// weights in 16-bit fixed point, as Pillow's "L" conversion does.
#include <array>
#include <cstring>

#include "tessel/ops/common.h"
#include "tessel/ops/control/control_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_image_decoder_ops(OpRegistry& r);
// image_jpeg.cpp: baseline JPEG, bit exact with libjpeg-turbo's defaults.
void decode_jpeg(const uint8_t* data, size_t n, int64_t* h, int64_t* w, int64_t* channels, std::vector<uint8_t>* px);

namespace {

// A decoded image: 8-bit samples, 1 (gray) or 3 (RGB) channels, row-major.
struct Image {
  int64_t h = 0, w = 0, channels = 0;
  std::vector<uint8_t> px;
};

// Bounds-checked little/big-endian reads from the encoded bytes.
struct Bytes {
  const uint8_t* p;
  size_t n;
  uint32_t u8(size_t at) const {
    TS_CHECK(at < n, "ImageDecoder: truncated image data");
    return p[at];
  }
  uint32_t le16(size_t at) const { return u8(at) | (u8(at + 1) << 8); }
  uint32_t le32(size_t at) const { return le16(at) | (le16(at + 2) << 16); }
  uint32_t be16(size_t at) const { return (u8(at) << 8) | u8(at + 1); }
  uint32_t be32(size_t at) const { return (be16(at) << 16) | be16(at + 2); }
};

void check_dims(int64_t h, int64_t w) {
  TS_CHECK(h > 0 && w > 0 && h <= (1 << 16) && w <= (1 << 16) && h * w <= (int64_t{1} << 28),
           "ImageDecoder: bad image size ", w, "x", h);
}

// ---- BMP ---------------------------------------------------------------------------

Image decode_bmp(const Bytes& b) {
  const uint32_t data = b.le32(10), header = b.le32(14);
  TS_CHECK(header >= 40, "ImageDecoder: unsupported BMP header");
  const int64_t w = static_cast<int32_t>(b.le32(18));
  const int64_t raw_h = static_cast<int32_t>(b.le32(22));
  const uint32_t bpp = b.le16(28), compression = b.le32(30);
  TS_CHECK((bpp == 24 || bpp == 32) && compression == 0, "ImageDecoder: only uncompressed 24/32-bit BMP is supported");
  const bool top_down = raw_h < 0;
  const int64_t h = top_down ? -raw_h : raw_h;
  check_dims(h, w);
  const int64_t bytes_pp = bpp / 8, stride = (w * bytes_pp + 3) / 4 * 4;
  Image img{h, w, 3, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
  for (int64_t y = 0; y < h; ++y) {
    const size_t row = data + static_cast<size_t>((top_down ? y : h - 1 - y) * stride);
    for (int64_t x = 0; x < w; ++x) {
      const size_t at = row + static_cast<size_t>(x * bytes_pp);  // stored B, G, R
      for (int c = 0; c < 3; ++c) img.px[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(b.u8(at + 2 - c));
    }
  }
  return img;
}

// ---- PNM ---------------------------------------------------------------------------

Image decode_pnm(const Bytes& b) {
  const bool color = b.u8(1) == '6';
  size_t at = 2;
  auto number = [&]() {
    for (;;) {  // whitespace and comments
      const uint32_t c = b.u8(at);
      if (c == '#') {
        while (b.u8(at) != '\n') ++at;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++at;
      } else {
        break;
      }
    }
    int64_t v = 0;
    TS_CHECK(b.u8(at) >= '0' && b.u8(at) <= '9', "ImageDecoder: malformed PNM header");
    while (at < b.n && b.p[at] >= '0' && b.p[at] <= '9') {
      v = v * 10 + (b.p[at++] - '0');
      TS_CHECK(v < (1 << 20), "ImageDecoder: malformed PNM header");
    }
    return v;
  };
  const int64_t w = number(), h = number(), maxval = number();
  ++at;  // the single whitespace byte before the samples
  check_dims(h, w);
  TS_CHECK(maxval >= 1 && maxval <= 255, "ImageDecoder: only 8-bit PNM is supported");
  const int64_t ch = color ? 3 : 1;
  Image img{h, w, ch, std::vector<uint8_t>(static_cast<size_t>(h * w * ch))};
  for (size_t i = 0; i < img.px.size(); ++i) {
    const uint32_t v = b.u8(at + i);
    img.px[i] = static_cast<uint8_t>(maxval == 255 ? v : (v * 255 + static_cast<uint32_t>(maxval) / 2) / static_cast<uint32_t>(maxval));
  }
  return img;
}

// ---- TIFF --------------------------------------------------------------------------

Image decode_tiff(const Bytes& b) {
  const bool le = b.u8(0) == 'I';
  auto u16 = [&](size_t at) { return le ? b.le16(at) : b.be16(at); };
  auto u32 = [&](size_t at) { return le ? b.le32(at) : b.be32(at); };
  const size_t ifd = u32(4);
  const uint32_t count = u16(ifd);
  int64_t w = 0, h = 0, spp = 1, compression = 1, planar = 1, rows_per_strip = 0;
  std::vector<uint32_t> bits, offsets;
  // A tag value: inline when it fits in 4 bytes, else at the offset.
  auto values = [&](size_t entry) {
    const uint32_t type = u16(entry + 2), n = u32(entry + 4);
    const uint32_t size = type == 3 ? 2 : type == 4 ? 4 : 1;
    TS_CHECK(n < (1u << 20), "ImageDecoder: malformed TIFF");
    const size_t base = n * size <= 4 ? entry + 8 : u32(entry + 8);
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < n; ++i) v.push_back(size == 2 ? u16(base + 2 * i) : size == 4 ? u32(base + 4 * i) : b.u8(base + i));
    return v;
  };
  for (uint32_t i = 0; i < count; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    const uint32_t tag = u16(e);
    const std::vector<uint32_t> v = values(e);
    TS_CHECK(!v.empty(), "ImageDecoder: malformed TIFF tag ", tag);
    switch (tag) {
      case 256: w = v[0]; break;
      case 257: h = v[0]; break;
      case 258: bits = v; break;
      case 259: compression = v[0]; break;
      case 273: offsets = v; break;
      case 277: spp = v[0]; break;
      case 278: rows_per_strip = v[0]; break;
      case 284: planar = v[0]; break;
      default: break;
    }
  }
  check_dims(h, w);
  TS_CHECK(compression == 1 && planar == 1, "ImageDecoder: only uncompressed, chunky TIFF is supported");
  TS_CHECK(spp == 1 || spp == 3 || spp == 4, "ImageDecoder: unsupported TIFF samples per pixel ", spp);
  for (uint32_t bb : bits) TS_CHECK(bb == 8, "ImageDecoder: only 8-bit TIFF is supported");
  if (rows_per_strip <= 0 || rows_per_strip > h) rows_per_strip = h;
  const int64_t ch = spp == 1 ? 1 : 3;
  Image img{h, w, ch, std::vector<uint8_t>(static_cast<size_t>(h * w * ch))};
  for (int64_t y = 0; y < h; ++y) {
    const size_t strip = static_cast<size_t>(y / rows_per_strip);
    TS_CHECK(strip < offsets.size(), "ImageDecoder: missing TIFF strip");
    const size_t row = offsets[strip] + static_cast<size_t>((y % rows_per_strip) * w * spp);
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < ch; ++c)
        img.px[static_cast<size_t>((y * w + x) * ch + c)] = static_cast<uint8_t>(b.u8(row + static_cast<size_t>(x * spp + c)));
  }
  return img;
}

// ---- inflate (RFC 1951) for PNG -----------------------------------------------------

class Inflater {
 public:
  Inflater(const uint8_t* p, size_t n, size_t limit) : p_(p), n_(n), limit_(limit) {}

  std::vector<uint8_t> run() {
    bool last = false;
    while (!last) {
      last = bits(1) != 0;
      switch (bits(2)) {
        case 0: stored(); break;
        case 1: fixed(); break;
        case 2: dynamic(); break;
        default: fail("ImageDecoder: bad deflate block type");
      }
    }
    return std::move(out_);
  }

 private:
  struct Huffman {
    std::array<uint16_t, 16> count{};
    std::vector<uint16_t> symbol;
  };

  uint32_t bits(int k) {
    while (bitcnt_ < k) {
      TS_CHECK(pos_ < n_, "ImageDecoder: truncated compressed data");
      bitbuf_ |= static_cast<uint32_t>(p_[pos_++]) << bitcnt_;
      bitcnt_ += 8;
    }
    const uint32_t v = bitbuf_ & ((1u << k) - 1);
    bitbuf_ >>= k;
    bitcnt_ -= k;
    return v;
  }

  void emit(uint8_t v) {
    TS_CHECK(out_.size() < limit_, "ImageDecoder: decompressed data larger than the image");
    out_.push_back(v);
  }

  void stored() {
    bitbuf_ = 0;  // to the byte boundary
    bitcnt_ = 0;
    TS_CHECK(pos_ + 4 <= n_, "ImageDecoder: truncated stored block");
    const uint32_t len = p_[pos_] | (p_[pos_ + 1] << 8), nlen = p_[pos_ + 2] | (p_[pos_ + 3] << 8);
    TS_CHECK(len == (~nlen & 0xffffu), "ImageDecoder: corrupt stored block");
    pos_ += 4;
    TS_CHECK(pos_ + len <= n_, "ImageDecoder: truncated stored block");
    for (uint32_t i = 0; i < len; ++i) emit(p_[pos_ + i]);
    pos_ += len;
  }

  static Huffman build(const uint16_t* lengths, size_t n) {
    Huffman h;
    h.symbol.assign(n, 0);
    for (size_t s = 0; s < n; ++s) h.count[lengths[s]]++;
    int left = 1;  // codes of each length still available
    for (int len = 1; len < 16; ++len) {
      left = left * 2 - h.count[static_cast<size_t>(len)];
      TS_CHECK(left >= 0, "ImageDecoder: over-subscribed Huffman code");
    }
    std::array<uint16_t, 16> offs{};
    for (int len = 1; len < 15; ++len) offs[static_cast<size_t>(len + 1)] = offs[static_cast<size_t>(len)] + h.count[static_cast<size_t>(len)];
    for (size_t s = 0; s < n; ++s)
      if (lengths[s]) h.symbol[offs[lengths[s]]++] = static_cast<uint16_t>(s);
    return h;
  }

  int decode(const Huffman& h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; ++len) {
      code |= static_cast<int>(bits(1));
      const int count = h.count[static_cast<size_t>(len)];
      if (code - count < first) return h.symbol[static_cast<size_t>(index + (code - first))];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    fail("ImageDecoder: invalid Huffman code");
  }

  void codes(const Huffman& lit, const Huffman& dist) {
    static constexpr uint16_t kLenBase[] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                            31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static constexpr uint16_t kLenExtra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                             2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static constexpr uint16_t kDistBase[] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                             33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                             1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static constexpr uint16_t kDistExtra[] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                              6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
      const int sym = decode(lit);
      if (sym < 256) {
        emit(static_cast<uint8_t>(sym));
        continue;
      }
      if (sym == 256) return;
      const int li = sym - 257;
      TS_CHECK(li < 29, "ImageDecoder: bad length code");
      const size_t len = kLenBase[li] + bits(kLenExtra[li]);
      const int di = decode(dist);
      TS_CHECK(di < 30, "ImageDecoder: bad distance code");
      const size_t d = kDistBase[di] + bits(kDistExtra[di]);
      TS_CHECK(d <= out_.size(), "ImageDecoder: distance too far back");
      for (size_t i = 0; i < len; ++i) emit(out_[out_.size() - d]);
    }
  }

  void fixed() {
    uint16_t l[288 + 30];
    for (int s = 0; s < 288; ++s) l[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    for (int s = 0; s < 30; ++s) l[288 + s] = 5;
    codes(build(l, 288), build(l + 288, 30));
  }

  void dynamic() {
    const size_t nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
    TS_CHECK(nlen <= 286 && ndist <= 30, "ImageDecoder: bad dynamic block counts");
    static constexpr uint8_t kOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    uint16_t l[320] = {};
    for (size_t i = 0; i < ncode; ++i) l[kOrder[i]] = static_cast<uint16_t>(bits(3));
    const Huffman lencode = build(l, 19);
    size_t i = 0;
    while (i < nlen + ndist) {
      const int sym = decode(lencode);
      if (sym < 16) {
        l[i++] = static_cast<uint16_t>(sym);
        continue;
      }
      uint16_t v = 0;
      size_t rep;
      if (sym == 16) {
        TS_CHECK(i > 0, "ImageDecoder: repeat with no previous length");
        v = l[i - 1];
        rep = 3 + bits(2);
      } else if (sym == 17) {
        rep = 3 + bits(3);
      } else {
        rep = 11 + bits(7);
      }
      TS_CHECK(i + rep <= nlen + ndist, "ImageDecoder: too many code lengths");
      while (rep--) l[i++] = v;
    }
    TS_CHECK(l[256] != 0, "ImageDecoder: no end-of-block code");
    codes(build(l, nlen), build(l + nlen, ndist));
  }

  const uint8_t* p_;
  size_t n_, limit_, pos_ = 0;
  uint32_t bitbuf_ = 0;
  int bitcnt_ = 0;
  std::vector<uint8_t> out_;
};

// ---- PNG ---------------------------------------------------------------------------

uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return static_cast<uint8_t>(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

Image decode_png(const Bytes& b) {
  size_t at = 8;
  int64_t w = 0, h = 0;
  uint32_t depth = 0, color = 0, interlace = 0;
  std::vector<uint8_t> idat, palette;
  for (;;) {
    const uint32_t len = b.be32(at);
    TS_CHECK(at + 12 + static_cast<size_t>(len) <= b.n, "ImageDecoder: truncated PNG chunk");
    const std::string type(reinterpret_cast<const char*>(b.p + at + 4), 4);
    const size_t data = at + 8;
    if (type == "IHDR") {
      w = b.be32(data);
      h = b.be32(data + 4);
      depth = b.u8(data + 8);
      color = b.u8(data + 9);
      interlace = b.u8(data + 12);
    } else if (type == "PLTE") {
      palette.assign(b.p + data, b.p + data + len);
    } else if (type == "IDAT") {
      idat.insert(idat.end(), b.p + data, b.p + data + len);
    } else if (type == "IEND") {
      break;
    }
    at = data + len + 4;
  }
  check_dims(h, w);
  TS_CHECK(depth == 8 && interlace == 0, "ImageDecoder: only 8-bit, non-interlaced PNG is supported");
  int64_t spp;
  switch (color) {
    case 0: spp = 1; break;
    case 2: spp = 3; break;
    case 3: spp = 1; break;
    case 4: spp = 2; break;
    case 6: spp = 4; break;
    default: fail("ImageDecoder: bad PNG colour type ", color);
  }
  TS_CHECK(idat.size() >= 2 && (idat[0] & 0x0f) == 8 && ((idat[0] << 8) | idat[1]) % 31 == 0 && !(idat[1] & 0x20),
           "ImageDecoder: bad zlib stream in PNG");
  const int64_t stride = w * spp;
  const size_t expected = static_cast<size_t>(h * (stride + 1));
  std::vector<uint8_t> raw = Inflater(idat.data() + 2, idat.size() - 2, expected).run();
  TS_CHECK(raw.size() == expected, "ImageDecoder: PNG data has ", raw.size(), " bytes, expected ", expected);
  // Undo the per-row filters in place (row r's bytes start at r*(stride+1)+1).
  std::vector<uint8_t> pix(static_cast<size_t>(h * stride));
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t filter = raw[static_cast<size_t>(y * (stride + 1))];
    const uint8_t* src = raw.data() + y * (stride + 1) + 1;
    uint8_t* cur = pix.data() + y * stride;
    const uint8_t* up = y ? cur - stride : nullptr;
    for (int64_t i = 0; i < stride; ++i) {
      const int a = i >= spp ? cur[i - spp] : 0, u = up ? up[i] : 0, c = up && i >= spp ? up[i - spp] : 0;
      int v = src[i];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += u; break;
        case 3: v += (a + u) / 2; break;
        case 4: v += paeth(a, u, c); break;
        default: fail("ImageDecoder: bad PNG filter ", static_cast<int>(filter));
      }
      cur[i] = static_cast<uint8_t>(v);
    }
  }
  const int64_t ch = color == 0 || color == 4 ? 1 : 3;
  Image img{h, w, ch, std::vector<uint8_t>(static_cast<size_t>(h * w * ch))};
  for (int64_t i = 0; i < h * w; ++i) {
    const uint8_t* s = pix.data() + i * spp;
    uint8_t* d = img.px.data() + i * ch;
    if (color == 3) {
      TS_CHECK(static_cast<size_t>(s[0]) * 3 + 2 < palette.size(), "ImageDecoder: PNG palette index out of range");
      for (int c = 0; c < 3; ++c) d[c] = palette[static_cast<size_t>(s[0]) * 3 + static_cast<size_t>(c)];
    } else {
      for (int64_t c = 0; c < ch; ++c) d[c] = s[c];  // alpha, if any, is the sample after
    }
  }
  return img;
}

// ---- the operator --------------------------------------------------------------------

Image decode(const Bytes& b) {
  auto starts = [&](const char* magic) {
    const size_t m = std::strlen(magic);
    return b.n >= m && std::memcmp(b.p, magic, m) == 0;
  };
  if (starts("BM")) return decode_bmp(b);
  if (starts("P5") || starts("P6")) return decode_pnm(b);
  if (starts("II*") || starts("MM\x00*")) return decode_tiff(b);
  if (starts("\x89PNG\r\n\x1a\n")) return decode_png(b);
  if (starts("\xff\xd8")) {
    Image img;
    decode_jpeg(b.p, b.n, &img.h, &img.w, &img.channels, &img.px);
    return img;
  }
  if (b.n >= 12 && std::memcmp(b.p, "RIFF", 4) == 0 && std::memcmp(b.p + 8, "WEBP", 4) == 0)
    fail("ImageDecoder: WebP is not supported by the reference decoder");
  if (starts("\x00\x00\x00\x0cjP") || starts("\xff\x4f\xff\x51"))
    fail("ImageDecoder: JPEG 2000 is not supported by the reference decoder");
  fail("ImageDecoder: unrecognised image format");
}

enum class PixelFormat { Rgb, Bgr, Gray };

PixelFormat pixel_format(const Node& n) {
  const std::string f = n.attr_string("pixel_format", "RGB");
  if (f == "RGB") return PixelFormat::Rgb;
  if (f == "BGR") return PixelFormat::Bgr;
  if (f == "Grayscale") return PixelFormat::Gray;
  fail(n.describe(), ": pixel_format must be RGB, BGR or Grayscale, got '", f, "'");
}

void infer_image_decoder(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), [](DType t) { return t == DType::U8; }, "uint8");
  const int64_t ch = pixel_format(ctx.node) == PixelFormat::Gray ? 1 : 3;
  ctx.set_output(0, DType::U8, {ctl::fresh_dim(ctx.node, 0, "h"), ctl::fresh_dim(ctx.node, 0, "w"), ch});
}

void kernel_image_decoder(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  check_dtype(n, 0, x.dtype(), [](DType t) { return t == DType::U8; }, "uint8");
  TS_CHECK(x.rank() == 1, n.describe(), ": encoded stream must be 1-D, got ", dims_str(x.shape()));
  const PixelFormat fmt = pixel_format(n);
  const Image img = decode(Bytes{x.raw(), static_cast<size_t>(x.numel())});
  const int64_t ch = fmt == PixelFormat::Gray ? 1 : 3;
  Tensor y(DType::U8, {img.h, img.w, ch});
  uint8_t* d = y.mutable_data<uint8_t>();
  for (int64_t i = 0; i < img.h * img.w; ++i) {
    const uint8_t* s = img.px.data() + i * img.channels;
    const uint32_t r = s[0], g = img.channels == 3 ? s[1] : s[0], bl = img.channels == 3 ? s[2] : s[0];
    switch (fmt) {
      case PixelFormat::Rgb: d[i * 3] = static_cast<uint8_t>(r); d[i * 3 + 1] = static_cast<uint8_t>(g); d[i * 3 + 2] = static_cast<uint8_t>(bl); break;
      case PixelFormat::Bgr: d[i * 3] = static_cast<uint8_t>(bl); d[i * 3 + 1] = static_cast<uint8_t>(g); d[i * 3 + 2] = static_cast<uint8_t>(r); break;
      case PixelFormat::Gray:
        d[i] = img.channels == 1 ? s[0] : static_cast<uint8_t>((r * 19595 + g * 38470 + bl * 7471 + 0x8000) >> 16);
        break;
    }
  }
  ctx.set_output(0, y);
}

}  // namespace

void register_image_decoder_ops(OpRegistry& r) {
  r.add(OpSchema{"ImageDecoder", "", 1, 1, 1, 1, infer_image_decoder, kernel_image_decoder, nullptr, 20});
}

}  // namespace tessel
