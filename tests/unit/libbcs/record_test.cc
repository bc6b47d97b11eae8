// The record codec (bcs/record.h): what a rank writes reads back the same,
// libprotobuf reads the same bytes the same way (the schema in
// proto/bcs.proto is the format), and bad files are refused naming the
// file and the offset.
#include "bcs/record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "bcs.pb.h"

namespace r = bcs::record;
using testing::HasSubstr;

namespace {

r::Header header() {
  r::Header h;
  h.rank = 2;
  h.size = 4;
  h.program = "/bin/app";
  h.args = {"-x", "", "3"};
  h.exe_hash = 0xfeedfacecafebeefull;
  h.wtime = true;
  return h;
}

std::vector<r::Event> events() {
  r::Event m;
  m.kind = r::Kind::match;
  m.index = 7;
  m.source = 0;
  m.tag = 12;
  m.seq = 300;
  r::Event t;
  t.kind = r::Kind::test;
  t.repeat = 123456;  // a polling loop's "not yet"s
  r::Event s;
  s.kind = r::Kind::testsome;
  s.indices = {3, 0, 2};
  r::Event a;
  a.kind = r::Kind::testany;
  a.flag = true;
  a.indices = {-32766};  // MPI_UNDEFINED-like negatives too
  r::Event p;
  p.kind = r::Kind::iprobe;
  p.flag = true;
  p.source = 3;
  p.tag = -1;
  p.slice = 41;  // the slice it found the message in
  r::Event d;    // the slice schedule: slices 40, 41 and 300 took 17, 1 and 2 descriptors
  for (auto note : {r::Drain{40, 17}, r::Drain{41, 1}, r::Drain{300, 2}})
    EXPECT_TRUE(r::add_drain(&d, note));
  return {m, t, s, a, p, d};
}

std::string file_bytes() {
  std::string b;
  r::append_header(header(), &b);
  for (const auto& e : events()) r::append_event(e, &b);
  return b;
}

TEST(Record, RoundTrips) {
  r::File f;
  std::string err;
  ASSERT_TRUE(r::parse(file_bytes(), "x.rec", &f, &err)) << err;
  EXPECT_TRUE(f.header == header());
  EXPECT_EQ(f.events, events());
}

TEST(Record, LibprotobufReadsTheSameRecords) {
  const std::string b = file_bytes();
  google::protobuf::io::ArrayInputStream raw(b.data(), static_cast<int>(b.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  std::vector<bcs::v1::RecordEntry> entries;
  uint32_t len;
  while (in.ReadVarint32(&len)) {
    const auto limit = in.PushLimit(static_cast<int>(len));
    bcs::v1::RecordEntry e;
    ASSERT_TRUE(e.ParseFromCodedStream(&in));
    in.PopLimit(limit);
    entries.push_back(e);
  }
  ASSERT_EQ(entries.size(), 1 + events().size());
  ASSERT_TRUE(entries[0].has_header());
  EXPECT_EQ(entries[0].header().rank(), 2);
  EXPECT_EQ(entries[0].header().args_size(), 3);
  EXPECT_EQ(entries[0].header().exe_hash(), 0xfeedfacecafebeefull);
  EXPECT_EQ(entries[0].header().format(), r::kFormat);
  EXPECT_TRUE(entries[0].header().wtime());
  const auto& m = entries[1].event();
  EXPECT_EQ(m.kind(), 1u);
  EXPECT_EQ(m.index(), 7u);
  EXPECT_EQ(m.tag(), 12);
  EXPECT_EQ(m.seq(), 300u);
  EXPECT_EQ(entries[2].event().repeat(), 123456u);
  EXPECT_EQ(entries[3].event().indices_size(), 3);
  EXPECT_EQ(entries[4].event().indices(0), -32766);
  EXPECT_EQ(entries[5].event().tag(), -1);
  EXPECT_EQ(entries[5].event().slice(), 41u);
  EXPECT_EQ(entries[6].event().kind(), 14u);
  EXPECT_EQ(entries[6].event().index(), 39u);
  EXPECT_EQ(entries[6].event().indices_size(), 6);
  EXPECT_EQ(entries[6].event().indices(4), 259);
  // And what libprotobuf writes, the codec reads.
  std::string theirs;
  {
    google::protobuf::io::StringOutputStream so(&theirs);
    google::protobuf::io::CodedOutputStream out(&so);
    for (const auto& e : entries) {
      out.WriteVarint32(static_cast<uint32_t>(e.ByteSizeLong()));
      e.SerializeToCodedStream(&out);
    }
  }
  r::File f;
  std::string err;
  ASSERT_TRUE(r::parse(theirs, "theirs.rec", &f, &err)) << err;
  EXPECT_EQ(f.events, events());
}

TEST(Record, BadFilesNameTheFileAndTheOffset) {
  auto refused = [](std::string_view bytes, const std::string& what) {
    r::File f;
    std::string err;
    EXPECT_FALSE(r::parse(bytes, "/tmp/r/rank2.rec", &f, &err));
    EXPECT_THAT(err, HasSubstr("/tmp/r/rank2.rec: "));
    EXPECT_THAT(err, HasSubstr(what));
  };
  const std::string good = file_bytes();
  refused("", "no header");
  refused(good.substr(0, good.size() - 3), "offset");  // truncated
  refused("\x05" "abc", "past the end");
  refused(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), "varint");
  refused("hello, world\n", "offset 0");  // a foreign file
  std::string event_first;
  r::append_event(events()[1], &event_first);
  refused(event_first, "an event before the header");
  std::string two_headers;
  r::append_header(header(), &two_headers);
  r::append_header(header(), &two_headers);
  refused(two_headers, "a second header");
  r::Header future = header();
  future.format = 9;
  std::string later;
  r::append_header(future, &later);
  refused(later, "record format 9");
  std::string unknown = good;
  r::Event bogus;
  bogus.kind = static_cast<r::Kind>(40);
  r::append_event(bogus, &unknown);
  refused(unknown, "event kind 40 is unknown");
}

TEST(Record, DescribeSaysWhatHappened) {
  EXPECT_EQ(r::describe(events()[0]), "wildcard receive #7 matched source 0 tag 12 (its send number 300)");
  EXPECT_EQ(r::describe(events()[2]), "MPI_Testsome indices 3 0 2");
  EXPECT_EQ(r::describe(events()[1]), "123456 x MPI_Test flag 0");
  EXPECT_EQ(r::describe(events()[4]), "MPI_Iprobe flag 1 source 3 tag -1 in slice 41");
  EXPECT_EQ(r::describe(events()[5]), "slices 40 to 300 took 20 descriptors in 3");
}

TEST(Record, TheSliceScheduleIsNotesInOrder) {
  std::vector<r::Drain> notes;
  ASSERT_TRUE(r::drains_of(events()[5], &notes));
  EXPECT_EQ(notes, (std::vector<r::Drain>{{40, 17}, {41, 1}, {300, 2}}));
  r::Event e = events()[5];
  EXPECT_FALSE(r::add_drain(&e, {299, 1}));  // slices only go forward
  EXPECT_FALSE(r::add_drain(&e, {301, 0}));  // a note is of some descriptors
  EXPECT_FALSE(r::add_drain(&e, {300 + (uint64_t{1} << 32), 1}));  // too far: another batch
  r::Event fresh;
  EXPECT_FALSE(r::add_drain(&fresh, {0, 1}));  // slices count from 1
  // Malformed ones are refused when read, naming the file.
  for (auto bad : {std::vector<int32_t>{1, 2, 3}, {1, 0}, {-1, 2}}) {
    r::Event b = events()[5];
    b.indices = bad;
    std::string bytes;
    r::append_header(header(), &bytes);
    r::append_event(b, &bytes);
    r::File f;
    std::string err;
    EXPECT_FALSE(r::parse(bytes, "s.rec", &f, &err));
    EXPECT_THAT(err, HasSubstr("s.rec: "));
    EXPECT_THAT(err, HasSubstr("slice schedule"));
  }
}

}  // namespace
