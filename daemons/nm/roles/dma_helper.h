// DMA helper (DH), the P2P microphase: moves the bytes of this slice's
// chunks. Inline payloads are written straight into the receive buffer;
// a sender on this node is read by cross-memory attach through a staging
// buffer; a sender on another node is read remotely: this node sends a
// DmaGet, the sender's DMA helper reads its rank and answers with the bytes
// (serve(), run from inside the fabric's progress whatever this node is
// waiting for). The P2P microstrobe says how many remote reads this node
// must serve; the microphase ends only when they are served and its own
// chunks have landed.
#pragma once

#include <unordered_map>
#include <vector>

#include "buffer_receiver.h"
#include "ports.h"
#include "wire.h"

namespace bcs::nm {

class DmaHelper {
 public:
  explicit DmaHelper(uint32_t self) : self_(self) {}
  // P2P. `ranks` may be null (no job here any more): the announced remote
  // reads are still awaited so the microphase completes.
  wire::Report run(const wire::Strobe& s, LocalRanks* ranks, Net& net, BufferReceiver& br);
  // MSM, after the matches are scheduled: delivers this slice's inline
  // messages that lead their pair (nothing of an older transfer of the
  // same sender and receiver is left to move), so that a slice that moves
  // nothing else needs no P2P. They are taken out of br.chunks(), and the
  // MSM report counts only the chunks left (`chunks`), with the inline ones
  // in `delivered` and their bytes in `bytes`.
  static void deliver_inline(LocalRanks& job, BufferReceiver& br, wire::Report& rep);
  // Sender side of a remote read; `ranks` is the job this node runs now
  // (null: none). The reply goes to m.from.
  static void serve(const core::Message& m, LocalRanks* ranks, Net& net);
  // A chunk from a node manager of another host is asked for in remote
  // reads of at most this many bytes, all sent at once, so that reading
  // the sender, the network and writing the receiver overlap.
  static constexpr uint64_t kRemotePiece = uint64_t{1} << 20;
  // The remote reads (DmaGet) the P2P sends for chunk `c`: 0 for a chunk
  // from a local sender or inline, else 1, or one per kRemotePiece for a
  // chunk the receiving rank cannot read itself. The MSM announces their
  // number to the sending node, so both must count alike.
  static uint32_t remote_gets(const Chunk& c, LocalRanks& job);
  // Writes an inline chunk (whole: inline payloads travel whole) into its
  // receiver and completes the receive.
  static void land_inline(LocalRanks& job, const Chunk& c);
  // Copies ahead (below); on by default.
  void set_copy_ahead(bool on) { copy_ahead_ = on; }

 private:
  // A copy order handed out early: rank `to` reads `len` bytes at `src` of
  // process `pid` into its `dst`.
  struct Ahead {
    int32_t to;
    uint32_t pid;
    uint64_t src, dst, len;
  };
  // Copies ahead (P2P pipelining). At the end of a P2P, each receiving rank
  // asleep in MPI is handed the next piece of its first single-copy
  // transfer, so it copies while the strobe runs the next slice's DEM and
  // MSM (two node managers: round trips through the manager). The next P2P
  // settles them first, and a chunk that a landed piece covers is not
  // copied again. Only ever early, never instead: a piece that failed, was
  // taken back or does not cover its chunk is as if it had not been, and
  // the chunk is copied (and its outcome reported) in its own microphase.
  // The bytes land early in a receive buffer the program cannot look at
  // yet (its request completes with the last chunk, as before), read from
  // a send buffer it may not change until then.
  void settle_ahead(LocalRanks& job, BufferReceiver& br);
  bool landed(int32_t to, uint32_t pid, uint64_t src, uint64_t dst, uint64_t len) const;
  void copy_ahead(LocalRanks& job, BufferReceiver& br);
  // The process a receiving rank would read `len` bytes of `m` from
  // itself (single copy), 0 if such a piece is not copied that way.
  static uint32_t single_copy_source(LocalRanks& job, const Match& m, uint64_t len);
  // Who may help with the copy orders of `m` (NmJob::post_copy): `share`
  // when its sender may write part of them, a local rank that receives
  // nothing in this P2P and holds no piece ahead, so it has no copy of its
  // own to make (two ranks exchanging large messages each copy their own;
  // asked to share as well, one of them would copy one and a half); else
  // `split`, the receiver's second thread if its node has a CPU to spare.
  CopyHelp help_for(LocalRanks& job, const Match& m) const;

  const uint32_t self_;
  bool copy_ahead_ = true;
  std::vector<Ahead> ahead_;   // handed out, not settled
  std::vector<Ahead> landed_;  // settled, copied without error
  std::vector<int32_t> receiving_;  // ranks receiving bytes in this P2P (help_for)
  std::vector<uint8_t> staging_;  // bounce buffer for local copies
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, int32_t> xfer_error_;  // transfer id -> bcs_err_*
};

}  // namespace bcs::nm
