// The record codec (include/bcs/record.h): protobuf's wire format for the
// RecordEntry messages of proto/bcs.proto, written and read by hand so that
// libmpi needs no libprotobuf. Every read is bounds-checked.
#include "bcs/record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace bcs::record {

namespace {

// ------------------------------------------------------------- writing
void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
uint64_t zigzag(int32_t v) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(v)) << 1) ^ static_cast<uint64_t>(v < 0 ? ~0ull : 0ull);
}
void put_tag(std::string* out, uint32_t field, uint32_t wire) { put_varint(out, (field << 3) | wire); }
// proto3: a field at its default is not written.
void put_u64(std::string* out, uint32_t field, uint64_t v) {
  if (!v) return;
  put_tag(out, field, 0);
  put_varint(out, v);
}
void put_s32(std::string* out, uint32_t field, int32_t v) {
  if (!v) return;
  put_tag(out, field, 0);
  put_varint(out, zigzag(v));
}
void put_bytes(std::string* out, uint32_t field, std::string_view s, bool always = false) {
  if (s.empty() && !always) return;
  put_tag(out, field, 2);
  put_varint(out, s.size());
  out->append(s);
}
size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
// The RecordEntry holding `msg` as field `entry_field`, length first,
// written straight into `out` (no copy of the entry: this is per event).
void frame(uint32_t entry_field, const std::string& msg, std::string* out) {
  const uint64_t tag = (entry_field << 3) | 2;
  put_varint(out, varint_size(tag) + varint_size(msg.size()) + msg.size());
  put_varint(out, tag);
  put_varint(out, msg.size());
  out->append(msg);
}
// The message being encoded: one buffer kept (a rank records from one
// thread at a time).
std::string& scratch() {
  thread_local std::string m;
  m.clear();
  return m;
}

// ------------------------------------------------------------- reading
struct In {
  std::string_view b;
  size_t pos = 0;
  size_t base = 0;  // file offset of b[0], for messages
  std::string err;
  bool fail(const std::string& why) {
    if (err.empty()) err = "offset " + std::to_string(base + pos) + ": " + why;
    return false;
  }
  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= b.size()) return fail("truncated varint");
      const auto c = static_cast<uint8_t>(b[pos++]);
      *v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return true;
    }
    return fail("varint longer than 10 bytes");
  }
  bool bytes(std::string_view* s, size_t max) {
    const size_t at = pos;  // errors name where the length starts
    uint64_t n;
    if (!varint(&n)) return false;
    if (n > b.size() - pos) {
      pos = at;
      return fail("a length of " + std::to_string(n) + " past the end");
    }
    if (n > max) {
      pos = at;
      return fail("a field of " + std::to_string(n) + " bytes (at most " + std::to_string(max) + ")");
    }
    *s = b.substr(pos, n);
    pos += n;
    return true;
  }
  // Skips a field of an unknown number (a newer writer).
  bool skip(uint32_t wire) {
    uint64_t v;
    std::string_view s;
    switch (wire) {
      case 0: return varint(&v);
      case 1: if (b.size() - pos < 8) return fail("truncated fixed64"); pos += 8; return true;
      case 2: return bytes(&s, b.size());
      case 5: if (b.size() - pos < 4) return fail("truncated fixed32"); pos += 4; return true;
      default: return fail("wire type " + std::to_string(wire) + " is not protobuf's");
    }
  }
  In sub(std::string_view s) const {
    In i;
    i.b = s;
    i.base = base + static_cast<size_t>(s.data() - b.data());
    return i;
  }
};

int32_t unzigzag(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v >> 1) ^ -static_cast<uint32_t>(v & 1)); }

constexpr size_t kMaxString = size_t{1} << 20;
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxIndices = size_t{1} << 24;

// Reads each field of a message: fn(field, wire) consumes the value, or
// returns false after failing. Unknown fields are skipped by fn via skip().
template <class Fn>
bool fields(In& in, Fn&& fn) {
  while (in.pos < in.b.size()) {
    uint64_t key;
    if (!in.varint(&key)) return false;
    const uint32_t field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
    if (field == 0) return in.fail("field number 0");
    if (!fn(field, wire)) return false;
  }
  return true;
}

bool want(In& in, uint32_t field, uint32_t wire, uint32_t expected) {
  if (wire == expected) return true;
  return in.fail("field " + std::to_string(field) + " has wire type " + std::to_string(wire));
}

bool read_header(In in, Header* h, std::string* err) {
  *h = Header{};
  h->format = 0;
  h->rank = 0;
  const bool ok = fields(in, [&](uint32_t f, uint32_t w) {
    uint64_t v;
    std::string_view s;
    switch (f) {
      case 1: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->format = static_cast<uint32_t>(v); return true;
      case 2: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->rank = unzigzag(v); return true;
      case 3: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->size = static_cast<uint32_t>(v); return true;
      case 4: if (!want(in, f, w, 2) || !in.bytes(&s, kMaxString)) return false; h->program = s; return true;
      case 5:
        if (!want(in, f, w, 2) || !in.bytes(&s, kMaxString)) return false;
        if (h->args.size() >= kMaxArgs) return in.fail("more than " + std::to_string(kMaxArgs) + " arguments");
        h->args.emplace_back(s);
        return true;
      case 6: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->nodes = static_cast<uint32_t>(v); return true;
      case 7: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->slice_ns = v; return true;
      case 8: if (!want(in, f, w, 2) || !in.bytes(&s, kMaxString)) return false; h->version = s; return true;
      case 9: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->exe_hash = v; return true;
      case 10: if (!want(in, f, w, 0) || !in.varint(&v)) return false; h->wtime = v != 0; return true;
      default: return in.skip(w);
    }
  });
  if (!ok) *err = in.err;
  return ok;
}

bool read_event(In in, Event* e, std::string* err) {
  *e = Event{};
  e->source = e->tag = 0;
  uint64_t kind = 0;
  bool ok = fields(in, [&](uint32_t f, uint32_t w) {
    uint64_t v;
    std::string_view s;
    switch (f) {
      case 1: if (!want(in, f, w, 0) || !in.varint(&kind)) return false; return true;
      case 2: if (!want(in, f, w, 0) || !in.varint(&v)) return false; e->index = v; return true;
      case 3: if (!want(in, f, w, 0) || !in.varint(&v)) return false; e->source = unzigzag(v); return true;
      case 4: if (!want(in, f, w, 0) || !in.varint(&v)) return false; e->tag = unzigzag(v); return true;
      case 5: if (!want(in, f, w, 0) || !in.varint(&v)) return false; e->seq = v; return true;
      case 6: if (!want(in, f, w, 0) || !in.varint(&v)) return false; e->flag = v != 0; return true;
      case 9: if (!want(in, f, w, 0) || !in.varint(&v)) return false; e->slice = v; return true;
      case 8:
        if (!want(in, f, w, 0) || !in.varint(&v)) return false;
        if (v == 0) return in.fail("an event repeated 0 times");
        e->repeat = v;
        return true;
      case 7: {
        // Packed (wire type 2) as written; one at a time (0) as a parser must accept.
        if (w == 0) {
          if (!in.varint(&v)) return false;
          if (e->indices.size() >= kMaxIndices) return in.fail("too many indices");
          e->indices.push_back(unzigzag(v));
          return true;
        }
        if (!want(in, f, w, 2) || !in.bytes(&s, in.b.size())) return false;
        In p = in.sub(s);
        while (p.pos < p.b.size()) {
          if (!p.varint(&v)) {
            in.err = p.err;
            return false;
          }
          if (e->indices.size() >= kMaxIndices) return in.fail("too many indices");
          e->indices.push_back(unzigzag(v));
        }
        return true;
      }
      default: return in.skip(w);
    }
  });
  if (ok && (kind == 0 || kind > kKindMax)) ok = in.fail("event kind " + std::to_string(kind) + " is unknown");
  e->kind = static_cast<Kind>(kind);
  if (ok && e->kind == Kind::drain) {
    std::vector<Drain> notes;
    if (!drains_of(*e, &notes)) ok = in.fail("a slice schedule that is not (slice, count) pairs");
  }
  if (!ok) *err = in.err;
  return ok;
}

}  // namespace

bool drains_of(const Event& e, std::vector<Drain>* out) {
  if (e.kind != Kind::drain || e.indices.size() % 2 != 0) return false;
  const size_t at = out->size();
  uint64_t slice = e.index;
  for (size_t i = 0; i < e.indices.size(); i += 2) {
    if (e.indices[i] < 0 || e.indices[i + 1] <= 0) {
      out->resize(at);
      return false;
    }
    slice += static_cast<uint64_t>(e.indices[i]);
    out->push_back(Drain{slice, static_cast<uint64_t>(e.indices[i + 1])});
  }
  return true;
}

bool add_drain(Event* e, const Drain& d) {
  constexpr uint64_t kMax = INT32_MAX;
  if (d.count == 0 || d.count > kMax) return false;
  if (e->indices.empty()) {
    if (d.slice == 0) return false;
    e->kind = Kind::drain;
    e->index = d.slice - 1;
    e->slice = 0;
    e->seq = d.slice;
    e->indices = {1, static_cast<int32_t>(d.count)};
    return true;
  }
  const uint64_t last = e->seq;
  if (d.slice < last || d.slice - last > kMax || e->indices.size() + 2 > kMaxIndices) return false;
  e->indices.push_back(static_cast<int32_t>(d.slice - last));
  e->indices.push_back(static_cast<int32_t>(d.count));
  e->seq = d.slice;
  return true;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::match: return "wildcard receive";
    case Kind::test: return "MPI_Test";
    case Kind::testall: return "MPI_Testall";
    case Kind::testany: return "MPI_Testany";
    case Kind::testsome: return "MPI_Testsome";
    case Kind::waitany: return "MPI_Waitany";
    case Kind::waitsome: return "MPI_Waitsome";
    case Kind::iprobe: return "MPI_Iprobe";
    case Kind::probe: return "MPI_Probe";
    case Kind::improbe: return "MPI_Improbe";
    case Kind::mprobe: return "MPI_Mprobe";
    case Kind::get_status: return "MPI_Request_get_status";
    case Kind::wtime: return "MPI_Wtime";
    case Kind::drain: return "slice";
  }
  return "?";
}

namespace {
std::string describe_what(const Event& e) {
  std::string s = kind_name(e.kind);
  if (e.repeat != 1) s = std::to_string(e.repeat) + " x " + s;
  auto peer = [&] { return " source " + std::to_string(e.source) + " tag " + std::to_string(e.tag); };
  switch (e.kind) {
    case Kind::match:
      return s + " #" + std::to_string(e.index) + " matched" + peer() +
             (e.seq ? " (its send number " + std::to_string(e.seq) + ")" : "");
    case Kind::test:
    case Kind::testall:
    case Kind::get_status: return s + " flag " + std::to_string(e.flag);
    case Kind::iprobe:
    case Kind::improbe: return s + " flag " + std::to_string(e.flag) + (e.flag ? peer() : "");
    case Kind::probe:
    case Kind::mprobe: return s + peer();
    case Kind::wtime: return s;
    case Kind::drain: {
      std::vector<Drain> notes;
      drains_of(e, &notes);
      uint64_t n = 0;
      for (const auto& d : notes) n += d.count;
      if (notes.empty()) return "no slices";
      return "slices " + std::to_string(notes.front().slice) + " to " +
             std::to_string(notes.back().slice) + " took " + std::to_string(n) + " descriptors in " +
             std::to_string(notes.size());
    }
    default: {
      s += e.kind == Kind::testany ? " flag " + std::to_string(e.flag) + " index" : " indices";
      for (int32_t i : e.indices) s += " " + std::to_string(i);
      if (e.indices.empty()) s += " none";
      return s;
    }
  }
}
}  // namespace

std::string describe(const Event& e) {
  std::string s = describe_what(e);
  if (e.slice && e.kind != Kind::drain) s += " in slice " + std::to_string(e.slice);
  return s;
}

void append_header(const Header& h, std::string* out) {
  std::string m;
  put_u64(&m, 1, h.format);
  put_s32(&m, 2, h.rank);
  put_u64(&m, 3, h.size);
  put_bytes(&m, 4, h.program);
  for (const auto& a : h.args) put_bytes(&m, 5, a, true);
  put_u64(&m, 6, h.nodes);
  put_u64(&m, 7, h.slice_ns);
  put_bytes(&m, 8, h.version);
  put_u64(&m, 9, h.exe_hash);
  put_u64(&m, 10, h.wtime ? 1 : 0);
  frame(1, m, out);
}

void append_event(const Event& e, std::string* out) {
  std::string& m = scratch();
  put_u64(&m, 1, static_cast<uint64_t>(e.kind));
  put_u64(&m, 2, e.index);
  put_s32(&m, 3, e.source);
  put_s32(&m, 4, e.tag);
  put_u64(&m, 5, e.seq);
  put_u64(&m, 6, e.flag ? 1 : 0);
  if (!e.indices.empty()) {
    size_t bytes = 0;
    for (int32_t i : e.indices) bytes += varint_size(zigzag(i));
    put_tag(&m, 7, 2);
    put_varint(&m, bytes);
    for (int32_t i : e.indices) put_varint(&m, zigzag(i));
  }
  if (e.repeat != 1) put_u64(&m, 8, e.repeat);
  put_u64(&m, 9, e.slice);
  frame(2, m, out);
}

bool parse(std::string_view bytes, const std::string& name, File* out, std::string* error) {
  In in;
  in.b = bytes;
  File f;
  bool have_header = false;
  auto fail = [&](const std::string& why) {
    *error = name + ": " + why;
    return false;
  };
  while (in.pos < in.b.size()) {
    const size_t at = in.pos;
    std::string_view entry;
    if (!in.bytes(&entry, in.b.size())) return fail(in.err);
    In e = in.sub(entry);
    uint32_t which = 0;
    std::string_view body;
    const bool ok = fields(e, [&](uint32_t field, uint32_t wire) {
      if (field == 1 || field == 2) {
        if (!want(e, field, wire, 2) || !e.bytes(&body, e.b.size())) return false;
        which = field;
        return true;
      }
      return e.skip(wire);
    });
    if (!ok) return fail(e.err);
    if (!which) return fail("offset " + std::to_string(at) + ": a record that is neither a header nor an event");
    std::string why;
    if (which == 1) {
      if (have_header) return fail("offset " + std::to_string(at) + ": a second header");
      if (!read_header(e.sub(body), &f.header, &why)) return fail(why);
      if (f.header.format != kFormat)
        return fail("offset " + std::to_string(at) + ": record format " + std::to_string(f.header.format) +
                    " (this bcs reads format " + std::to_string(kFormat) + ")");
      have_header = true;
    } else {
      if (!have_header) return fail("offset " + std::to_string(at) + ": an event before the header (not a bcs recording?)");
      Event ev;
      if (!read_event(e.sub(body), &ev, &why)) return fail(why);
      f.events.push_back(std::move(ev));
    }
  }
  if (!have_header) return fail("empty: no header (not a bcs recording?)");
  *out = std::move(f);
  return true;
}

bool read_file(const std::string& path, File* out, std::string* error, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = path + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) {
      *error = path + ": larger than " + std::to_string(max_bytes) + " bytes";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return parse(bytes, path, out, error);
}

uint64_t hash_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) h = (h ^ buf[i]) * 1099511628211ull;
  }
  ::close(fd);
  return h;
}

}  // namespace bcs::record
