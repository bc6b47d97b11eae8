// Record and replay (issue 10): the events a rank records for a
// deterministic replay, and their file format.
//
// A recording is a directory: `header.rec` (the job, written by bcs run
// --record) and `rank<R>.rec` per rank (written by the rank's shim). Each
// file is a stream of length-delimited protobuf records (a varint length,
// then a RecordEntry of proto/bcs.proto): the first holds a RecordHeader,
// the others RecordEvents in the order the rank saw them. The shim writes
// and reads them with this small codec (no libprotobuf in libmpi); a unit
// test checks that libprotobuf reads the same bytes the same way.
//
// What a rank records is what it could observe differently from one run to
// the next (docs/architecture.md, "Record and replay"): which send each
// wildcard receive matched, what each test and non-blocking probe returned,
// which requests a wait-any/some completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bcs::record {

constexpr uint32_t kFormat = 1;

enum class Kind : uint32_t {
  match = 1,     // the `index`-th wildcard receive matched (source, tag), send number `seq`
  test = 2,      // MPI_Test: flag
  testall = 3,   // MPI_Testall: flag
  testany = 4,   // MPI_Testany: flag, indices[0] (MPI_UNDEFINED when none)
  testsome = 5,  // MPI_Testsome: indices (none: outcount 0)
  waitany = 6,   // MPI_Waitany: indices[0]
  waitsome = 7,  // MPI_Waitsome: indices
  iprobe = 8,    // MPI_Iprobe: flag, (source, tag) when found
  probe = 9,     // MPI_Probe with a wildcard: (source, tag)
  improbe = 10,  // MPI_Improbe: flag, (source, tag) when found
  mprobe = 11,   // MPI_Mprobe with a wildcard: (source, tag)
  get_status = 12,  // MPI_Request_get_status: flag
  wtime = 13,       // MPI_Wtime (bcs run --record-wtime): the reading's bits in `seq`
  // The slice schedule, a batch of notes "in job slice S the rank's node
  // manager took C descriptors from its ring": `indices` holds pairs (slice
  // delta, C), the first delta from `index`, and `seq` is the last note's
  // slice (about 2 bytes a note; see drains_of). Not replayed (a replay may have other slices); for reading
  // a recording (bcs replay --info).
  drain = 14,
};
constexpr uint32_t kKindMax = 14;
const char* kind_name(Kind k);

struct Event {
  Kind kind = Kind::test;
  uint64_t index = 0;   // match: the wildcard receive's number, 1, 2, ... in post order
  int32_t source = -1;  // communicator rank
  int32_t tag = -1;
  uint64_t seq = 0;     // match: the matched send's number from its sender (0: unknown)
  bool flag = false;
  std::vector<int32_t> indices;
  // The job slice it happened in (proto/bcs.proto, RecordEvent.slice); 0:
  // not noted. Not compared when replaying.
  uint64_t slice = 0;
  // The same event this many times in a row (a polling loop's "not yet"s
  // are one record, not millions).
  uint64_t repeat = 1;
  bool same_as(const Event& o) const {
    return kind == o.kind && index == o.index && source == o.source && tag == o.tag &&
           seq == o.seq && flag == o.flag && indices == o.indices;
  }
  // same_as: the same outcome, when and how often aside.
  bool operator==(const Event& o) const {
    return same_as(o) && slice == o.slice && repeat == o.repeat;
  }
};
// The notes of a drain event, in order; false (nothing added) if it is not
// well formed (an odd count, a negative delta, a note of 0 descriptors).
struct Drain {
  uint64_t slice = 0;
  uint64_t count = 0;
  bool operator==(const Drain& o) const { return slice == o.slice && count == o.count; }
};
bool drains_of(const Event& e, std::vector<Drain>* out);
// Appends note `d` to drain event `e` (index = 0 and no indices: a new
// batch, based at d.slice - 1); false when it does not fit (slices not
// ascending, or too far apart): then write `e` out and start another.
bool add_drain(Event* e, const Drain& d);

// "match #3 from 2 tag 7 (send 5)", for divergence messages.
std::string describe(const Event& e);

struct Header {
  uint32_t format = kFormat;
  int32_t rank = -1;       // -1: the job's header
  uint32_t size = 0;       // ranks in the job
  std::string program;
  std::vector<std::string> args;
  uint32_t nodes = 0;      // node managers (job header)
  uint64_t slice_ns = 0;   // slice length (job header)
  std::string version;     // bcs version
  uint64_t exe_hash = 0;   // FNV-1a 64 of the executable (rank headers)
  bool wtime = false;      // MPI_Wtime readings are recorded too
  bool operator==(const Header& o) const {
    return format == o.format && rank == o.rank && size == o.size && program == o.program &&
           args == o.args && nodes == o.nodes && slice_ns == o.slice_ns && version == o.version &&
           exe_hash == o.exe_hash && wtime == o.wtime;
  }
};

// One framed record (length prefix included), appended to `out`.
void append_header(const Header& h, std::string* out);
void append_event(const Event& e, std::string* out);

// A whole file's records, every byte checked: a truncated, corrupted or
// foreign file gives `error` naming `name` and the byte offset, never a
// crash. The first record must be a header.
struct File {
  Header header;
  std::vector<Event> events;
};
bool parse(std::string_view bytes, const std::string& name, File* out, std::string* error);
// Reads and parses the file at `path` (at most `max_bytes`).
bool read_file(const std::string& path, File* out, std::string* error,
               size_t max_bytes = size_t{1} << 30);

// FNV-1a 64 of a file's bytes (0 when it cannot be read).
uint64_t hash_file(const std::string& path);

}  // namespace bcs::record
