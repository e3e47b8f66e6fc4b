#include "tessel/runtime/object_loader.h"

#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessel/support/error.h"

namespace tessel {

const std::map<std::string, void*>& kernel_runtime_symbols() {
  static const std::map<std::string, void*> table = {
      {"memset", reinterpret_cast<void*>(&::memset)},
      {"memcpy", reinterpret_cast<void*>(&::memcpy)},
      {"memmove", reinterpret_cast<void*>(&::memmove)},
      {"fmod", reinterpret_cast<void*>(static_cast<double (*)(double, double)>(&::fmod))},
      {"fmodf", reinterpret_cast<void*>(static_cast<float (*)(float, float)>(&::fmodf))},
      {"floor", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::floor))},
      {"floorf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::floorf))},
      {"ceil", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::ceil))},
      {"ceilf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::ceilf))},
      {"trunc", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::trunc))},
      {"truncf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::truncf))},
      {"rint", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::rint))},
      {"rintf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::rintf))},
      {"fma", reinterpret_cast<void*>(static_cast<double (*)(double, double, double)>(&::fma))},
      {"fmaf", reinterpret_cast<void*>(static_cast<float (*)(float, float, float)>(&::fmaf))},
  };
  return table;
}

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxMapped = uint64_t(1) << 32;  // kernel objects are megabytes
constexpr uint64_t kStubBytes = 8;                   // jmp *disp32(%rip); int3; int3

template <class... Args>
[[noreturn]] void corrupt(const Args&... args) {
  fail("corrupt kernel object (", args..., ")");
}

// [offset, offset + size) of the object's bytes, checked.
std::string_view slice(std::string_view bytes, uint64_t offset, uint64_t size, const char* what) {
  if (offset > bytes.size() || size > bytes.size() - offset)
    corrupt(what, " at bytes ", offset, "+", size, " past the end of ", bytes.size());
  return bytes.substr(offset, size);
}

template <class T>
T read_struct(std::string_view bytes, uint64_t offset, const char* what) {
  T v;
  std::memcpy(&v, slice(bytes, offset, sizeof(T), what).data(), sizeof(T));
  return v;
}

uint64_t align_up(uint64_t v, uint64_t a) {
  if (v > kMaxMapped) corrupt("sections larger than ", kMaxMapped, " bytes");
  return (v + a - 1) / a * a;
}

struct Section {
  Elf64_Shdr h{};
  std::string name;
  bool loaded = false;
  uint64_t place = 0;  // offset in the mapping
};

struct Symbol {
  Elf64_Sym s{};
  std::string name;
  void* runtime = nullptr;  // an undefined symbol's runtime function
  uint64_t stub = 0;        // ... and its call stub's offset in the mapping
  uint64_t got = 0;         // this symbol's GOT slot (offset in the mapping)
};

// A NUL-terminated name at `offset` of a string table.
std::string name_at(std::string_view table, uint64_t offset) {
  if (offset >= table.size()) corrupt("name offset ", offset, " outside its string table");
  const size_t end = table.find('\0', offset);
  if (end == std::string_view::npos) corrupt("unterminated name in a string table");
  return std::string(table.substr(offset, end - offset));
}

class Linker {
 public:
  explicit Linker(std::string_view elf) : elf_(elf) {}

  void parse() {
    const auto eh = read_struct<Elf64_Ehdr>(elf_, 0, "ELF header");
    TS_CHECK(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0, "corrupt kernel object (not an ELF file)");
    TS_CHECK(eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_machine == EM_X86_64,
             "kernel object is not x86-64 code (ELF class ", int(eh.e_ident[EI_CLASS]), ", machine ", eh.e_machine,
             "): it was compiled for another machine");
    TS_CHECK(eh.e_type == ET_REL, "corrupt kernel object (ELF type ", eh.e_type, ", not a relocatable object)");
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum)
      corrupt("section table: entry size ", eh.e_shentsize, ", ", eh.e_shnum, " sections, names in ", eh.e_shstrndx);
    const std::string_view table = slice(elf_, eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr), "section table");
    sections_.resize(eh.e_shnum);
    for (size_t i = 0; i < sections_.size(); ++i)
      sections_[i].h = read_struct<Elf64_Shdr>(table, i * sizeof(Elf64_Shdr), "section header");
    const std::string_view names = contents(sections_[eh.e_shstrndx], "section names");
    for (Section& s : sections_) s.name = name_at(names, s.h.sh_name);
    for (size_t i = 0; i < sections_.size(); ++i) {
      if (sections_[i].h.sh_type == SHT_SYMTAB) {
        TS_CHECK(symtab_ == 0, "corrupt kernel object (two symbol tables)");
        symtab_ = i;
      }
    }
    if (symtab_ != 0) read_symbols();
  }

  // Places the loaded sections, the stubs and the GOT; returns the mapping's size.
  uint64_t layout() {
    uint64_t at = 0;
    for (int exec = 1; exec >= 0; --exec) {
      for (Section& s : sections_) {
        if (!(s.h.sh_flags & SHF_ALLOC) || s.h.sh_size == 0 || bool(s.h.sh_flags & SHF_EXECINSTR) != bool(exec))
          continue;
        if (s.h.sh_type == SHT_X86_64_UNWIND || s.name == ".eh_frame") continue;  // nothing unwinds through kernels
        if (s.h.sh_type != SHT_PROGBITS && s.h.sh_type != SHT_NOBITS)
          fail("kernel object section '", s.name, "' has type ", s.h.sh_type, ", which the loader does not support");
        if ((s.h.sh_flags & SHF_WRITE) && (s.h.sh_flags & SHF_EXECINSTR))
          corrupt("section '", s.name, "' is writable and executable");
        if (s.h.sh_size > kMaxMapped) corrupt("section '", s.name, "' of ", s.h.sh_size, " bytes");
        const uint64_t align = s.h.sh_addralign == 0 ? 1 : s.h.sh_addralign;
        if ((align & (align - 1)) != 0 || align > kPage) corrupt("section '", s.name, "' alignment ", align);
        if (s.h.sh_type == SHT_PROGBITS) contents(s, "section contents");  // in bounds
        writable_ = writable_ || (s.h.sh_flags & SHF_WRITE);
        at = align_up(at, align);
        s.loaded = true;
        s.place = at;
        at = align_up(at + s.h.sh_size, 1);
      }
      if (exec) {
        at = align_up(at, kStubBytes);
        for (Symbol& y : symbols_)
          if (y.runtime) y.stub = at, at += kStubBytes;
        code_bytes_ = align_up(at, kPage);
        at = code_bytes_;
      }
    }
    at = align_up(at, 8);
    for (Symbol& y : symbols_) y.got = at, at += 8;
    return align_up(at, kPage);
  }

  // Copies the sections into `base`, fills stubs and GOT, applies relocations.
  void link(char* base) {
    base_ = base;
    for (const Section& s : sections_)
      if (s.loaded && s.h.sh_type == SHT_PROGBITS)
        std::memcpy(base + s.place, contents(s, "section contents").data(), s.h.sh_size);
    for (size_t i = 0; i < symbols_.size(); ++i) {
      Symbol& y = symbols_[i];
      if (y.runtime) {
        // ff 25 <disp32>: jmp *disp32(%rip), the displacement counted from the stub's end (6 bytes).
        const int64_t disp = int64_t(y.got) - int64_t(y.stub + 6);
        const int32_t d32 = static_cast<int32_t>(disp);
        const unsigned char stub[kStubBytes] = {0xff, 0x25, 0, 0, 0, 0, 0xcc, 0xcc};
        std::memcpy(base + y.stub, stub, kStubBytes);
        std::memcpy(base + y.stub + 2, &d32, 4);
      }
      const uint64_t addr = resolvable(i) ? address(i, false) : 0;
      std::memcpy(base + y.got, &addr, 8);
    }
    for (const Section& r : sections_) {
      if (r.h.sh_type == SHT_REL) fail("kernel object has REL relocations ('", r.name, "'); x86-64 objects use RELA");
      if (r.h.sh_type != SHT_RELA) continue;
      if (r.h.sh_info >= sections_.size()) corrupt("relocations '", r.name, "' for section ", r.h.sh_info);
      const Section& target = sections_[r.h.sh_info];
      if (!target.loaded) continue;  // relocations of debug info or unwind tables
      if (r.h.sh_link != symtab_ || symtab_ == 0) corrupt("relocations '", r.name, "' without the symbol table");
      if (r.h.sh_entsize != sizeof(Elf64_Rela)) corrupt("relocation entry size ", r.h.sh_entsize);
      const std::string_view relas = contents(r, "relocations");
      for (uint64_t at = 0; at + sizeof(Elf64_Rela) <= relas.size(); at += sizeof(Elf64_Rela))
        relocate(target, read_struct<Elf64_Rela>(relas, at, "relocation"));
    }
  }

  uint64_t code_bytes() const { return code_bytes_; }
  bool writable() const { return writable_; }

  // Global functions defined in loaded sections.
  std::map<std::string, void*> functions() const {
    std::map<std::string, void*> out;
    for (size_t i = 0; i < symbols_.size(); ++i) {
      const Elf64_Sym& s = symbols_[i].s;
      const int bind = ELF64_ST_BIND(s.st_info);
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
      if (s.st_shndx == SHN_UNDEF || !resolvable(i)) continue;
      out[symbols_[i].name] = reinterpret_cast<void*>(address(i, false));
    }
    return out;
  }

 private:
  std::string_view contents(const Section& s, const char* what) const {
    if (s.h.sh_type == SHT_NOBITS) return {};
    return slice(elf_, s.h.sh_offset, s.h.sh_size, what);
  }

  void read_symbols() {
    const Section& st = sections_[symtab_];
    if (st.h.sh_entsize != sizeof(Elf64_Sym) || st.h.sh_link >= sections_.size())
      corrupt("symbol table entry size ", st.h.sh_entsize, ", names in section ", st.h.sh_link);
    const std::string_view syms = contents(st, "symbol table");
    const std::string_view names = contents(sections_[st.h.sh_link], "symbol names");
    const auto& runtime = kernel_runtime_symbols();
    for (uint64_t at = 0; at + sizeof(Elf64_Sym) <= syms.size(); at += sizeof(Elf64_Sym)) {
      Symbol y;
      y.s = read_struct<Elf64_Sym>(syms, at, "symbol");
      y.name = name_at(names, y.s.st_name);
      if (y.s.st_shndx == SHN_UNDEF && !y.name.empty()) {
        auto it = runtime.find(y.name);
        TS_CHECK(it != runtime.end(), "the kernel object calls '", y.name,
                 "', which the tessel runtime does not provide to kernels");
        y.runtime = it->second;
      }
      symbols_.push_back(std::move(y));
    }
  }

  // Whether symbol i has an address: a runtime function, an absolute value,
  // or a place inside a loaded section.
  bool resolvable(size_t i) const {
    const Elf64_Sym& s = symbols_[i].s;
    if (symbols_[i].runtime || s.st_shndx == SHN_ABS) return true;
    if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE || s.st_shndx >= sections_.size()) return false;
    const Section& sec = sections_[s.st_shndx];
    return sec.loaded && s.st_value <= sec.h.sh_size;
  }

  // Symbol i's address once the mapping is at base_. A runtime function's
  // is its stub for a call (`call`), else the function itself.
  uint64_t address(size_t i, bool call) const {
    const Symbol& y = symbols_[i];
    const uint64_t b = reinterpret_cast<uint64_t>(base_);
    if (y.runtime) return call ? b + y.stub : reinterpret_cast<uint64_t>(y.runtime);
    if (y.s.st_shndx == SHN_ABS) return y.s.st_value;
    return b + sections_[y.s.st_shndx].place + y.s.st_value;
  }

  void relocate(const Section& target, const Elf64_Rela& r) {
    const uint32_t type = ELF64_R_TYPE(r.r_info);
    const uint64_t sym = ELF64_R_SYM(r.r_info);
    if (type == R_X86_64_NONE) return;
    if (sym >= symbols_.size()) corrupt("relocation of symbol ", sym, " of ", symbols_.size());
    if (!resolvable(sym)) corrupt("relocation against '", symbols_[sym].name, "', which has no address");
    const uint64_t width = type == R_X86_64_64 || type == R_X86_64_PC64 ? 8 : 4;
    if (r.r_offset > target.h.sh_size || width > target.h.sh_size - r.r_offset)
      corrupt("relocation at ", r.r_offset, " outside section '", target.name, "'");
    const uint64_t b = reinterpret_cast<uint64_t>(base_);
    const uint64_t p = b + target.place + r.r_offset;
    const uint64_t a = static_cast<uint64_t>(r.r_addend);
    uint64_t v = 0;
    switch (type) {
      case R_X86_64_64: v = address(sym, false) + a; break;
      case R_X86_64_PC64: v = address(sym, false) + a - p; break;
      case R_X86_64_PC32:
      case R_X86_64_PLT32: v = address(sym, true) + a - p; break;
      case R_X86_64_GOTPCREL:
      case R_X86_64_GOTPCRELX:
      case R_X86_64_REX_GOTPCRELX: v = b + symbols_[sym].got + a - p; break;
      default:
        fail("kernel object relocation type ", type, " is not supported by the loader (position-independent, "
             "small code model objects only)");
    }
    char* at = base_ + target.place + r.r_offset;
    if (width == 8) {
      std::memcpy(at, &v, 8);
      return;
    }
    const int64_t sv = static_cast<int64_t>(v);
    if (sv < INT32_MIN || sv > INT32_MAX) corrupt("relocation out of 32-bit range in '", target.name, "'");
    const int32_t v32 = static_cast<int32_t>(sv);
    std::memcpy(at, &v32, 4);
  }

  std::string_view elf_;
  std::vector<Section> sections_;
  std::vector<Symbol> symbols_;
  size_t symtab_ = 0;
  uint64_t code_bytes_ = 0;
  bool writable_ = false;
  char* base_ = nullptr;
};

}  // namespace

LoadedObject::LoadedObject(std::string_view elf) {
  Linker l(elf);
  l.parse();
  const uint64_t size = l.layout();
  if (size == 0) return;
  TS_CHECK(size <= kMaxMapped, "corrupt kernel object (", size, " bytes to map)");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TS_CHECK(p != MAP_FAILED, "loading kernels: cannot map ", size, " bytes: ", std::strerror(errno));
  base_ = p;
  size_ = size;
  try {
    char* base = static_cast<char*>(p);
    l.link(base);
    functions_ = l.functions();
    const uint64_t code = l.code_bytes();
    TS_CHECK(code == 0 || ::mprotect(base, code, PROT_READ | PROT_EXEC) == 0, "loading kernels: mprotect: ",
             std::strerror(errno));
    TS_CHECK(size == code || ::mprotect(base + code, size - code, PROT_READ | (l.writable() ? PROT_WRITE : 0)) == 0,
             "loading kernels: mprotect: ", std::strerror(errno));
  } catch (...) {
    ::munmap(base_, size_);
    base_ = nullptr;
    throw;
  }
}

LoadedObject::~LoadedObject() {
  if (base_) ::munmap(base_, size_);
}

void* LoadedObject::lookup(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second;
}

}  // namespace tessel
