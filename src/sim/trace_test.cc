#include "sim/trace.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::sim {
namespace {

using common::FromUnixMicros;
using common::Seconds;
using common::StatusCode;
using ::egs::testing::StatusIs;
using ::egs::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::string_view kTiresiasHeader =
    "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
constexpr std::string_view kPhillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n";
constexpr std::string_view kOpenbHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

std::vector<std::string> Ids(const Trace& trace) {
  std::vector<std::string> ids;
  for (const TraceJob& job : trace.jobs) ids.push_back(job.id);
  return ids;
}

// Expects InvalidArgument whose message contains `text`.
template <typename T>
void ExpectInvalid(const common::Result<T>& r, const std::string& text) {
  EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), HasSubstr(text));
}

TEST(LoadTiresiasTest, LoadsSortsStablyAndCountsSkips) {
  TempDir dir;
  std::string path = dir.Write("t.csv", std::string(kTiresiasHeader) +
                                            "0,1,30,606,vgg19,164,30\n"
                                            "1,8,0,133,vgg11,147,23\n"
                                            "2,0,10,1,vgg11,100,1\n"
                                            "3,2,30,157,inception4,127.5,26\n"
                                            "4,2,5,157,inception4,0,26\n");
  auto trace = LoadTiresias(path);
  ASSERT_OK(trace);
  EXPECT_EQ(trace->name, "t");
  EXPECT_THAT(Ids(*trace), ElementsAre("1", "0", "3"));  // 0 and 3 tie at 30 s: file order
  const TraceJob& job = trace->jobs[0];
  EXPECT_EQ(job.submit, FromUnixMicros(0));
  EXPECT_EQ(job.gpus, 8);
  EXPECT_EQ(job.hold, Seconds(147));
  EXPECT_EQ(job.team, "default");
  EXPECT_EQ(trace->jobs[2].hold, core::Duration(127'500'000));
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroGpus), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroDuration), 1u);
  EXPECT_EQ(SkippedTotal(*trace), 2u);
}

// A blank line between rows may be a row lost in an edit: it is skipped and counted like any
// other skipped row. Blank lines at the end of the file hold no row and are not counted.
TEST(LoadTraceTest, BlankLinesBetweenRowsAreCountedAsSkipped) {
  TempDir dir;
  auto tiresias = LoadTiresias(dir.Write("t.csv", std::string(kTiresiasHeader) +
                                                      "0,1,0,1,m,10,1\n\n1,0,5,1,m,10,1\n\r\n\n"
                                                      "2,2,9,1,m,10,1\n\n\n"));
  ASSERT_OK(tiresias);
  EXPECT_EQ(tiresias->jobs.size(), 2u);
  EXPECT_EQ(SkippedCount(*tiresias, kSkipBlankLine), 3u);
  EXPECT_EQ(SkippedCount(*tiresias, kSkipZeroGpus), 1u);
  ASSERT_EQ(tiresias->skipped.size(), 2u);  // in order of first occurrence
  EXPECT_EQ(tiresias->skipped[0].reason, kSkipBlankLine);
  auto philly = LoadPhilly(dir.Write("p.csv", std::string(kPhillyHeader) +
                                                  "\n2017-10-09 07:01:55,66,1,66,a\n"
                                                  "2017-10-09 07:02:55,66,1,66,a\n\n"));
  ASSERT_OK(philly);
  EXPECT_EQ(philly->jobs.size(), 2u);
  EXPECT_EQ(SkippedTotal(*philly), 1u);
  EXPECT_EQ(SkippedCount(*philly, kSkipBlankLine), 1u);
}

TEST(LoadTiresiasTest, MalformedRowNamesFileLineAndColumn) {
  TempDir dir;
  std::string path =
      dir.Write("t.csv", std::string(kTiresiasHeader) + "0,1,0,1,m,10,1\n1,abc,0,1,m,10,1\n");
  ExpectInvalid(LoadTiresias(path), "t.csv:3: column num_gpu: 'abc' is not an integer");
}

TEST(LoadPhillyTest, LoadsTeamsAndUtcTimes) {
  TempDir dir;
  std::string path = dir.Write("philly.csv", std::string(kPhillyHeader) +
                                                 "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                                                 "2017-10-09 06:13:03,2951.0,4,11804.0,6214e9\n"
                                                 "2017-10-09 06:13:04,10.0,0,0.0,6214e9\n"
                                                 "\n");
  auto trace = LoadPhilly(path);
  ASSERT_OK(trace);
  ASSERT_EQ(trace->jobs.size(), 2u);
  EXPECT_EQ(trace->jobs[0].id, "philly-3");
  EXPECT_EQ(trace->jobs[0].team, "6214e9");
  EXPECT_EQ(trace->jobs[0].gpus, 4);
  EXPECT_EQ(trace->jobs[1].submit, FromUnixMicros(1'507'532'515'000'000));
  EXPECT_EQ(trace->jobs[1].hold, Seconds(66));
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroGpus), 1u);
}

struct BadRow {
  std::string row;
  std::string message;
};

class LoadPhillyBadRowTest : public ::testing::TestWithParam<BadRow> {};

TEST_P(LoadPhillyBadRowTest, IsAnErrorNotASkip) {
  TempDir dir;
  std::string path = dir.Write("philly.csv", std::string(kPhillyHeader) +
                                                 "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
                                                 GetParam().row + "\n");
  ExpectInvalid(LoadPhilly(path), "philly.csv:3: " + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LoadPhillyBadRowTest,
    ::testing::Values(
        BadRow{"2017-10-09 07:01:55,-5.0,1,66.0,11cb48", "column duration: '-5.0' is negative"},
        BadRow{"2017-10-09 07:01:55,5.0,x,66.0,11cb48", "column num_gpus: 'x' is not an integer"},
        BadRow{"2017-10-09 07:01:55,5.0,-1,66.0,11cb48", "column num_gpus: '-1' is negative"},
        BadRow{"2017-13-09 07:01:55,5.0,1,5.0,11cb48", "column timestamp: '2017-13-09 07:01:55'"},
        BadRow{"2017-10-09 07:01:55,5.0,1,5.0", "expected 5 columns like the header, got 4"},
        BadRow{"2017-10-09 07:01:55,5.0,1,5.0,", "column cluster: is empty"},
        BadRow{"2017-10-09 07:01:55,5.0,1,5.0,\"vc", "field 5: its quote does not close"}));

TEST(LoadPhillyTest, MissingFileAndBadHeader) {
  TempDir dir;
  EXPECT_THAT(LoadPhilly(dir.File("absent.csv")), StatusIs(StatusCode::kNotFound));
  std::string path = dir.Write("philly.csv", "timestamp,duration,gpus,gpu_time,cluster\n");
  ExpectInvalid(LoadPhilly(path), "missing column 'num_gpus'");
}

constexpr std::string_view kSpotHeader =
    "job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,submit_time,duration,"
    "job_type\n";

TEST(LoadSpotJobsTest, LoadsWorkersTeamsPrioritiesAndModels) {
  TempDir dir;
  std::string path =
      dir.Write("jobs.csv", std::string(kSpotHeader) +
                                "437260,57,A100-SXM4-80GB,15,1,16,9589663,41060,Spot\n"
                                "239255,13,A10,20,1,1,0,2764799,HP\n"
                                "half,13,,4,0.5,1,30,60.5,HP\n"
                                "cpu,13,,4,0,1,40,60,HP\n"
                                "none,13,A10,4,2,0,40,60,Spot\n"
                                "zero,13,A10,4,2,1,40,0,Spot\n");
  auto trace = LoadSpotJobs(path);
  ASSERT_OK(trace);
  ASSERT_EQ(trace->jobs.size(), 3u);
  const TraceJob& hp = trace->jobs[0];  // sorted by submit
  EXPECT_EQ(hp.id, "239255");
  EXPECT_EQ(hp.team, "13");
  EXPECT_EQ(hp.priority, 300);
  EXPECT_EQ(hp.gpus, 1);
  EXPECT_EQ(hp.gpu_model, "A10");
  EXPECT_EQ(hp.hold, Seconds(2764799));
  const TraceJob& half = trace->jobs[1];
  EXPECT_EQ(half.gpus, 1);  // half a GPU books one
  EXPECT_DOUBLE_EQ(half.gpu_fraction, 0.5);
  EXPECT_EQ(half.gpu_model, "");
  EXPECT_EQ(half.hold, common::Duration(60'500'000));
  const TraceJob& spot = trace->jobs[2];
  EXPECT_EQ(spot.gpus, 16);  // 16 workers of one GPU
  EXPECT_EQ(spot.priority, 0);
  EXPECT_EQ(spot.submit, FromUnixMicros(0) + Seconds(9589663));
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroGpus), 2u);
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroDuration), 1u);
}

TEST(LoadSpotJobsTest, MalformedRowsAreErrors) {
  TempDir dir;
  auto load = [&](std::string_view row) {
    return LoadSpotJobs(dir.Write("jobs.csv", std::string(kSpotHeader) + std::string(row)));
  };
  ExpectInvalid(load("j,1,A10,4,1,1,0,60,BE\n"),
                "jobs.csv:2: column job_type: 'BE' is neither HP nor Spot");
  ExpectInvalid(load("j,1,A10,4,1.5,1,0,60,HP\n"),
                "jobs.csv:2: column gpu_request: '1.5' is not a GPU count");
  ExpectInvalid(load("j,1,A10,4,-1,1,0,60,HP\n"), "column gpu_request: '-1' is not a GPU count");
  ExpectInvalid(load("j,1,A10,4,65,1,0,60,HP\n"), "column gpu_request: '65' is not a GPU count");
  ExpectInvalid(load("j,1,A10,4,8,300000000,0,60,HP\n"),
                "column worker_num: 300000000 workers of 8 GPUs is out of range");
  ExpectInvalid(load(",1,A10,4,1,1,0,60,HP\n"), "column job_name: is empty");
  ExpectInvalid(load("j,,A10,4,1,1,0,60,HP\n"), "jobs.csv:2: column organization: is empty");
  ExpectInvalid(load("j,1,A10,4,1,1,soon,60,HP\n"), "column submit_time");
  ExpectInvalid(LoadSpotJobs(dir.Write("h.csv", "job_name,organization,gpu_model\n")),
                "missing column 'gpu_request'");
}

// The header and first rows of Helios's Venus/cluster_log.csv and Acme's trace_seren.csv, as
// their READMEs show them.
constexpr std::string_view kHeliosHeader =
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
    "queue\n";
constexpr std::string_view kAcmeHeader =
    "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,"
    "queue,gpu_time\n";

TEST(LoadJobLogTest, HeliosTeamsAreVirtualClusters) {
  TempDir dir;
  std::string path =
      dir.Write("cluster_log.csv",
                std::string(kHeliosHeader) +
                    "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,"
                    "2020-06-10 04:55:09,36848,0\n"
                    "1425512,uVMrF,vchbv,16,16,2,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,"
                    "2020-06-09 18:45:36,249,0\n"
                    "1425513,uzqls,vcpDC,0,4,1,COMPLETED,2020-06-09 18:41:28,2020-06-09 18:41:28,"
                    "2020-06-09 18:42:28,60,0\n"
                    "1425514,uzqls,vcpDC,8,4,1,CANCELLED,2020-06-09 18:40:00,,,0,0\n"
                    "1425515,uzqls,vcpDC,2,4,1,CANCELLED,2020-06-09 18:42:00,2020-06-09 18:42:00,"
                    "2020-06-09 18:42:00,0,0\n");
  auto format = DetectTraceFormat(path);
  ASSERT_OK(format);
  EXPECT_EQ(*format, TraceFormat::kJobLog);
  auto trace = LoadJobLog(path);
  ASSERT_OK(trace);
  EXPECT_EQ(trace->name, "cluster_log");
  ASSERT_THAT(Ids(*trace), ElementsAre("1425511", "1425512"));
  const TraceJob& first = trace->jobs[0];
  EXPECT_EQ(common::FormatTime(first.submit), "2020-06-09T18:41:01Z");
  EXPECT_EQ(first.gpus, 1);
  EXPECT_EQ(first.hold, Seconds(36848));
  EXPECT_EQ(first.team, "vcJkd");
  EXPECT_EQ(first.priority, 0);
  EXPECT_EQ(trace->jobs[1].gpus, 16);  // a failed job held its GPUs while it ran
  EXPECT_EQ(trace->jobs[1].team, "vchbv");
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroGpus), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipNeverScheduled), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroDuration), 1u);
}

TEST(LoadJobLogTest, AcmeTeamsAreUsersAndOffsetsAreHonoured) {
  TempDir dir;
  std::string path = dir.Write(
      "trace_seren.csv",
      std::string(kAcmeHeader) +
          "5778469,u5907,1,8,128,Other,COMPLETED,2023-03-01 00:23:58+08:00,"
          "2023-03-01 00:24:11+08:00,2023-03-01 01:09:04+08:00,2693,13,21544.0\n"
          "5778432,u17,1,4,128,SFT,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,"
          "2023-03-01 00:20:51+08:00,117.5,32,468.0\n");
  ASSERT_OK(DetectTraceFormat(path));
  EXPECT_EQ(*DetectTraceFormat(path), TraceFormat::kJobLog);
  auto trace = LoadJobLog(path);
  ASSERT_OK(trace);
  ASSERT_THAT(Ids(*trace), ElementsAre("5778432", "5778469"));  // sorted by submit
  EXPECT_EQ(common::FormatTime(trace->jobs[0].submit), "2023-02-28T16:18:22Z");
  EXPECT_EQ(trace->jobs[0].team, "u17");
  EXPECT_EQ(trace->jobs[0].hold, common::Duration(117'500'000));
  EXPECT_EQ(trace->jobs[1].team, "u5907");
  EXPECT_EQ(trace->jobs[1].gpus, 8);
  // Neither vc nor user: one team.
  auto bare = LoadJobLog(dir.Write("bare.csv",
                                   "job_id,gpu_num,submit_time,duration\n"
                                   "a,2,2023-05-17 11:00:58+00:00,18\n"));
  ASSERT_OK(bare);
  ASSERT_EQ(bare->jobs.size(), 1u);
  EXPECT_EQ(bare->jobs[0].team, "default");
}

TEST(LoadJobLogTest, MalformedRowsAreErrorsNamingLineAndColumn) {
  TempDir dir;
  const std::string header = std::string(kHeliosHeader);
  const std::string good_tail = ",2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n";
  struct Case {
    std::string row;
    std::string message;
  };
  const Case cases[] = {
      {"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01" + good_tail, ""},
      {"1,u,vc,-1,1,1,COMPLETED,2020-06-09 18:41:01" + good_tail, "b.csv:2: column gpu_num"},
      {"1,u,vc,1,1,1,COMPLETED,2020-06-09T18:41:01" + good_tail,
       "b.csv:2: column submit_time: '2020-06-09T18:41:01' is not a timestamp"},
      {"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,x,-5,0\n",
       "b.csv:2: column duration: '-5' is negative"},
      {"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,x,,0\n",
       "b.csv:2: column duration: is empty"},
      {"1,u,,1,1,1,COMPLETED,2020-06-09 18:41:01" + good_tail, "b.csv:2: column vc: is empty"},
      {",u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01" + good_tail, "b.csv:2: column job_id: is empty"},
      // start_time is read like every column, though the simulator decides the start.
      {"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,garbage,x,60,0\n",
       "b.csv:2: column start_time: 'garbage' is not a timestamp"},
      {"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-08 18:41:01,x,60,0\n",
       "b.csv:2: column start_time: is before submit_time"},
  };
  for (const Case& c : cases) {
    auto trace = LoadJobLog(dir.Write("b.csv", header + c.row));
    if (c.message.empty()) {
      EXPECT_OK(trace) << c.row;
    } else {
      ExpectInvalid(trace, c.message);
    }
  }
  // A job id given twice names both lines, even when the second row would be skipped.
  ExpectInvalid(
      LoadJobLog(dir.Write("d.csv", header + cases[0].row +
                                        "1,u,vc,0,1,1,COMPLETED,2020-06-09 18:41:01" + good_tail)),
      "d.csv:3: column job_id: '1' is given twice (first on line 2)");
  ExpectInvalid(LoadJobLog(dir.Write("m.csv", "job_id,gpu_num,submit_time\n")),
                "m.csv:1: missing column 'duration'");
}

// Jobs in the form of Philly's cluster_job_log (the example of its README, and the cases its
// notes describe).
constexpr std::string_view kPhillyJobLog = R"([
  {"status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
   "attempts": [
     {"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 01:13:23",
      "detail": [{"ip": "m47", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]}]},
     {"start_time": "2017-10-07 01:13:30", "end_time": "2017-10-09 06:53:12",
      "detail": [{"ip": "m412", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]},
                 {"ip": "m413", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]}]}],
   "submitted_time": "2017-10-07 01:11:39", "user": "ce2f4c"},
  {"status": "Killed", "vc": "6214e9", "jobid": "j2", "attempts": [
     {"start_time": "2017-10-07 00:00:00", "end_time": "2017-10-07 00:10:00",
      "detail": [{"ip": "m1", "gpus": ["gpu0"]}]},
     {"start_time": "None", "end_time": "2017-10-07 00:30:00", "detail": [{"ip": "m1", "gpus": ["gpu1"]}]}],
   "submitted_time": "2017-10-06 23:59:00", "user": "u"},
  {"status": "Failed", "vc": "6214e9", "jobid": "never", "attempts": [],
   "submitted_time": "2017-10-07 00:00:00", "user": "u"},
  {"status": "Pass", "vc": "6214e9", "jobid": "running", "attempts": [
     {"start_time": "2017-12-22 00:00:00", "end_time": null, "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}],
   "submitted_time": "2017-12-22 00:00:00", "user": "u"},
  {"status": "Pass", "vc": "6214e9", "jobid": "untimed", "attempts": [
     {"end_time": "2017-10-08 00:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}],
   "submitted_time": "2017-10-07 00:00:00", "user": "u"},
  {"status": "Pass", "vc": "6214e9", "jobid": "backwards", "attempts": [
     {"start_time": "2017-10-08 00:00:00", "end_time": "2017-10-07 00:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}],
   "submitted_time": "2017-10-07 00:00:00", "user": "u"},
  {"status": "Pass", "vc": "6214e9", "jobid": "cpu", "attempts": [
     {"start_time": "2017-10-07 00:00:00", "end_time": "2017-10-07 01:00:00", "detail": []}],
   "submitted_time": "2017-10-07 00:00:00", "user": "u"}
])";

TEST(LoadPhillyJobLogTest, GpusOfTheLargestAttemptFromFirstStartToLastEnd) {
  TempDir dir;
  const std::string path = dir.Write("cluster_job_log", "\n  " + std::string(kPhillyJobLog));
  auto format = DetectTraceFormat(path);
  ASSERT_OK(format);
  EXPECT_EQ(*format, TraceFormat::kPhillyJobLog);
  auto trace = LoadPhillyJobLog(path);
  ASSERT_OK(trace);
  EXPECT_EQ(trace->name, "cluster_job_log");
  ASSERT_THAT(Ids(*trace), ElementsAre("j2", "application_1506638472019_14199"));
  const TraceJob& j2 = trace->jobs[0];
  EXPECT_EQ(common::FormatTime(j2.submit), "2017-10-06T23:59:00Z");
  EXPECT_EQ(j2.gpus, 1);
  EXPECT_EQ(j2.hold, Seconds(1800));  // from the first start to the last end
  EXPECT_EQ(j2.team, "6214e9");
  const TraceJob& big = trace->jobs[1];
  EXPECT_EQ(big.gpus, 16);  // two servers of 8 in the second attempt
  EXPECT_EQ(big.hold, Seconds(2 * 86400 + 5 * 3600 + 41 * 60 + 3));  // the retry included
  EXPECT_EQ(big.team, "ee9e8c");
  EXPECT_EQ(SkippedCount(*trace, kSkipNeverScheduled), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipRunningAtEnd), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipNoRunTime), 2u);
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroGpus), 1u);
}

TEST(LoadPhillyJobLogTest, MalformedJobsNameTheJobAndMember) {
  TempDir dir;
  const std::string ok_attempt =
      R"({"start_time": "2017-10-07 00:00:00", "end_time": "2017-10-07 00:10:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]})";
  auto job = [&](const std::string& members) {
    return "[{\"vc\": \"a\", \"jobid\": \"j\", \"submitted_time\": \"2017-10-07 00:00:00\", " +
           members + "}]";
  };
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {job("\"attempts\": [" + ok_attempt + "]"), ""},
      {"[1,", "l.json: not a JSON job log: parse error at line 1, column 4"},
      // Found by fuzzing: a number past a double's range threw out of the loader.
      {"[2e462]",
       "l.json: not a JSON job log: at line 1, column 2: number overflow parsing '2e462'"},
      {"{}", "expected a JSON array of jobs"},
      {"[[]]", "l.json: jobs[0]: expected an object"},
      {job("\"attempts\": {}"), "l.json: jobs[0].attempts: expected an array"},
      {job("\"attempts\": [" + ok_attempt + ", 7]"), "jobs[0].attempts[1]: expected an object"},
      {job(R"("attempts": [{"start_time": 5, "detail": []}])"),
       "jobs[0].attempts[0].start_time: expected a string"},
      {job(R"("attempts": [{"start_time": "2017-10-07T00:00:00", "detail": []}])"),
       "jobs[0].attempts[0].start_time: '2017-10-07T00:00:00' is not a timestamp"},
      {job(R"("attempts": [{"start_time": "2017-10-07 00:00:00"}])"),
       "jobs[0].attempts[0].detail: expected an array"},
      {job(R"("attempts": [{"detail": [{"ip": "m1", "gpus": "gpu0"}]}])"),
       "jobs[0].attempts[0].detail[0].gpus: expected an array of GPU names"},
      {R"([{"vc": "a", "jobid": "j", "attempts": []}])", "jobs[0].submitted_time: is missing"},
      {R"([{"vc": "", "jobid": "j", "attempts": [], "submitted_time": "2017-10-07 00:00:00"}])",
       "jobs[0].vc: is empty"},
      {R"([{"vc": "a", "jobid": 3, "attempts": [], "submitted_time": "2017-10-07 00:00:00"}])",
       "jobs[0].jobid: expected a string"},
      {R"([{"vc": "a", "jobid": "j", "attempts": [], "submitted_time": "2017-10-07 00:00:00"},
           {"vc": "a", "jobid": "j", "attempts": [], "submitted_time": "2017-10-07 00:00:00"}])",
       "jobs[1].jobid: 'j' is given twice (first in jobs[0])"},
  };
  for (const Case& c : cases) {
    auto trace = LoadPhillyJobLog(dir.Write("l.json", c.text));
    if (c.message.empty()) {
      EXPECT_OK(trace) << c.text;
    } else {
      ExpectInvalid(trace, c.message);
    }
  }
  EXPECT_THAT(LoadPhillyJobLog(dir.File("absent")), StatusIs(StatusCode::kNotFound));
}

TEST(LoadPhillyMachinesTest, KeepsGpuMachinesAsANodeList) {
  TempDir dir;
  const std::string path =
      dir.Write("cluster_machine_list.csv",
                "machineId,number of GPUs,single GPU mem\nm31,8, 24GB\nm32,2, 12GB\nm33,0,\n");
  std::size_t cpu_only = 0;
  auto nodes = LoadNodeList(path, &cpu_only);
  ASSERT_OK(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "m31");
  EXPECT_EQ((*nodes)[0].cluster, "philly");
  EXPECT_EQ((*nodes)[0].gpus, 8);
  EXPECT_EQ((*nodes)[1].gpus, 2);
  EXPECT_EQ(cpu_only, 1u);
  ExpectInvalid(LoadPhillyMachines(dir.Write("d.csv", "machineId,number of GPUs\nm1,8\nm1,2\n")),
                "d.csv:3: column machineId: 'm1' is given twice (first on line 2)");
  ExpectInvalid(LoadPhillyMachines(dir.Write("g.csv", "machineId,number of GPUs\nm1,65\n")),
                "g.csv:2: column number of GPUs: 65 is more than the 64 GPUs");
}

TEST(LoadQuotaTableTest, PhillyOrHeliosByTheirHeader) {
  TempDir dir;
  auto philly = LoadQuotaTable(dir.Write("p.csv", "vc,node num\na,2\nb,1\n"));
  ASSERT_OK(philly);
  ASSERT_EQ(philly->size(), 2u);
  EXPECT_EQ((*philly)[0].team, "a");
  EXPECT_EQ((*philly)[0].gpus, 16);
  auto helios = LoadQuotaTable(
      dir.Write("h.csv", "date,vcA,vcB,total\n2020-09-01,8,16,24\n2020-09-02,16,0,16\n"));
  ASSERT_OK(helios);
  ASSERT_EQ(helios->size(), 2u);  // each VC's allocation on the last day it had one
  EXPECT_EQ((*helios)[0].team, "vcA");
  EXPECT_EQ((*helios)[0].gpus, 16);
  EXPECT_EQ((*helios)[1].gpus, 16);  // not 0, which would hold all of vcB's requests
  ExpectInvalid(LoadQuotaTable(dir.Write("x.csv", "team,gpus\na,8\n")),
                "x.csv:1: cannot tell the quota table's format from its header");
  ExpectInvalid(LoadQuotaTable(dir.Write("bad.csv", "vc,node num\na,0\n")),
                "bad.csv:2: column node num: must be >= 1");
  EXPECT_THAT(LoadQuotaTable(dir.File("absent.csv")), StatusIs(StatusCode::kNotFound));
}

TEST(DetectTraceFormatTest, TellsTheFormatsApartByTheirHeader) {
  TempDir dir;
  auto spot = DetectTraceFormat(dir.Write("s.csv", std::string(kSpotHeader)));
  ASSERT_OK(spot);
  EXPECT_EQ(*spot, TraceFormat::kSpot);
  auto philly = DetectTraceFormat(dir.Write("p.csv", std::string(kPhillyHeader)));
  auto openb = DetectTraceFormat(dir.Write("o.csv", std::string(kOpenbHeader)));
  auto tiresias = DetectTraceFormat(dir.Write("t.csv", std::string(kTiresiasHeader)));
  ASSERT_OK(philly);
  ASSERT_OK(openb);
  ASSERT_OK(tiresias);
  EXPECT_EQ(*philly, TraceFormat::kPhilly);
  EXPECT_EQ(*openb, TraceFormat::kOpenb);
  EXPECT_EQ(*tiresias, TraceFormat::kTiresias);
  ExpectInvalid(DetectTraceFormat(dir.Write("x.csv", "a,b,c\n")), "x.csv:1: cannot tell");
  ExpectInvalid(DetectTraceFormat(dir.File("absent.csv")), "cannot read");
  ExpectInvalid(DetectTraceFormat(dir.Write("e.csv", "")), "e.csv:1: file is empty");
  // A JSON job log after a UTF-8 byte-order mark is still one.
  auto bom = DetectTraceFormat(dir.Write("j.json", "\xEF\xBB\xBF[{\"jobid\": \"a\"}]"));
  ASSERT_OK(bom);
  EXPECT_EQ(*bom, TraceFormat::kPhillyJobLog);
  // Whole names only: a column whose name contains another's is not that column.
  ExpectInvalid(DetectTraceFormat(dir.Write("n.csv", "job_id,num_gpu,submit_time_note\n")),
                "n.csv:1: cannot tell");
}

TEST(UniformFleetTest, NodesTimesGpusOrANamedError) {
  auto fleet = UniformFleet("3x4", "c");
  ASSERT_OK(fleet);
  ASSERT_EQ(fleet->size(), 3u);
  EXPECT_EQ((*fleet)[2].name, "n2");
  EXPECT_EQ((*fleet)[2].cluster, "c");
  EXPECT_EQ((*fleet)[2].gpus, 4);
  for (std::string_view bad : {"", "3", "3x", "x4", "3x8x1", "ax8", "1.5x8"}) {
    ExpectInvalid(UniformFleet(bad), "expected NxG");
    EXPECT_FALSE(IsUniformFleetSpec(bad)) << bad;
  }
  // Sizes no fleet has (a typo) are refused before any node is built, saying which number is
  // out of which range: 99999999x8 took all the memory, and a node of 99,999 GPUs overflowed the
  // inventory's 16-bit free-GPU counts.
  ASSERT_OK(UniformFleet("2x64"));
  for (std::string_view bad : {"0x8", "-1x8", "1000001x8", "99999999999x8",
                               "99999999999999999999999x8", "-99999999999999999999999x8"}) {
    EXPECT_TRUE(IsUniformFleetSpec(bad)) << bad;
    ExpectInvalid(UniformFleet(bad), fmt::format("fleet '{}': N must be 1..1000000 (the number "
                                                 "of nodes), not {}",
                                                 bad, bad.substr(0, bad.find('x'))));
  }
  for (std::string_view bad : {"10x0", "4x65", "4x-8", "4x99999999999999999999"}) {
    ExpectInvalid(UniformFleet(bad), fmt::format("fleet '{}': G must be 1..64 (the GPUs of each "
                                                 "node), not {}",
                                                 bad, bad.substr(bad.find('x') + 1)));
  }
}

TEST(LoadOpenbPodsTest, LoadsFractionsPriorityAndConstraints) {
  TempDir dir;
  std::string path =
      dir.Write("pods.csv", std::string(kOpenbHeader) +
                                "p0,12000,16384,1,460,V100M16|V100M32,LS,Running,100,1100,102\n"
                                "p1,6000,12288,8,1000,,BE,Failed,50,150,60\n"
                                "p2,6000,12288,2,1000,,Guaranteed,Running,50,150,60\n");
  auto trace = LoadOpenbPods(path);
  ASSERT_OK(trace);
  ASSERT_THAT(Ids(*trace), ElementsAre("p1", "p2", "p0"));
  const TraceJob& frac = trace->jobs[2];
  EXPECT_EQ(frac.submit, FromUnixMicros(100'000'000));
  EXPECT_EQ(frac.hold, Seconds(998));  // deletion - scheduled
  EXPECT_DOUBLE_EQ(frac.gpu_fraction, 0.46);
  EXPECT_EQ(frac.gpu_model, "V100M16|V100M32");
  EXPECT_EQ(frac.team, "LS");
  EXPECT_EQ(frac.priority, 200);
  EXPECT_EQ(trace->jobs[0].priority, 0);
  EXPECT_EQ(trace->jobs[0].gpu_fraction, 1.0);
  EXPECT_EQ(trace->jobs[1].priority, 300);
  EXPECT_TRUE(trace->skipped.empty());
}

TEST(LoadOpenbPodsTest, CountsEachSkipReason) {
  TempDir dir;
  std::string path = dir.Write("pods.csv", std::string(kOpenbHeader) +
                                               "cpu,1000,1024,0,0,,BE,Running,0,10,1\n"
                                               "pending,1000,1024,1,500,,LS,Pending,0,10,\n"
                                               "pending2,1000,1024,1,500,,LS,Pending,0,12,\n"
                                               "early,1000,1024,1,500,,LS,Failed,0,5,9\n"
                                               "zero,1000,1024,1,500,,LS,Failed,0,9,9\n"
                                               "ok,1000,1024,1,500,,LS,Running,0,10,1\n");
  auto trace = LoadOpenbPods(path);
  ASSERT_OK(trace);
  EXPECT_THAT(Ids(*trace), ElementsAre("ok"));
  EXPECT_EQ(SkippedCount(*trace, kSkipCpuOnly), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipNeverScheduled), 2u);
  EXPECT_EQ(SkippedCount(*trace, kSkipDeletedBeforeScheduled), 1u);
  EXPECT_EQ(SkippedCount(*trace, kSkipZeroDuration), 1u);
  EXPECT_EQ(trace->skipped[0].reason, kSkipCpuOnly);  // order of first occurrence
}

TEST(LoadOpenbPodsTest, MalformedRowsAreErrors) {
  TempDir dir;
  auto load = [&](std::string_view row) {
    return LoadOpenbPods(dir.Write("pods.csv", std::string(kOpenbHeader) + std::string(row)));
  };
  ExpectInvalid(load("p,1,1,1,500,,XX,Running,0,10,1\n"),
                "pods.csv:2: column qos: unknown QoS class 'XX'");
  ExpectInvalid(load("p,1,1,1,1500,,LS,Running,0,10,1\n"),
                "column gpu_milli: 1500 is not in 1..1000");
  ExpectInvalid(load("p,1,1,1,500,,LS,Running,0,,1\n"),
                "column deletion_time: is empty for a scheduled pod");
  ExpectInvalid(load("p,1,1,1,500,,LS,Running,100,200,50\n"),
                "column scheduled_time: is before creation_time");
  ExpectInvalid(load("p,1,1,1,500,,LS,Running,0,10,1\np,1,1,1,500,,LS,Running,0,10,1\n"),
                "pods.csv:3: column name: 'p' is given twice (first on line 2)");
  // A CPU-only pod is skipped, but only once it parses.
  ExpectInvalid(load("p,1,1,0,0,,BE,Running,0,ten,1\n"),
                "column deletion_time: 'ten' is not a number");
}

TEST(LoadOpenbNodesTest, KeepsGpuNodes) {
  TempDir dir;
  std::string path = dir.Write("nodes.csv",
                               "sn,cpu_milli,memory_mib,gpu,model\n"
                               "n0,32000,262144,0,\n"
                               "n1,64000,262144,2,P100\n"
                               "n2,96000,393216,8,G2\n");
  std::size_t cpu_only = 99;
  auto nodes = LoadOpenbNodes(path, &cpu_only);
  ASSERT_OK(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ(cpu_only, 1u);
  EXPECT_EQ((*nodes)[1].name, "n2");
  EXPECT_EQ((*nodes)[1].cluster, "openb");
  EXPECT_EQ((*nodes)[1].gpu_model, "G2");
  EXPECT_EQ((*nodes)[1].gpus, 8);

  std::string bad = dir.Write("bad.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,\n");
  ExpectInvalid(LoadOpenbNodes(bad), "bad.csv:2: column model: is empty for a node with 2 GPUs");
  std::string twice =
      dir.Write("twice.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,G2\nn1,1,1,0,\n");
  ExpectInvalid(LoadOpenbNodes(twice), "twice.csv:3: column sn: 'n1' is given twice");
  std::string big = dir.Write("big.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,65,G2\n");
  ExpectInvalid(LoadOpenbNodes(big),
                "big.csv:2: column gpu: 65 is more than the 64 GPUs a node may have");
}

TEST(LoadSpotNodesTest, KeepsGpuNodes) {
  TempDir dir;
  constexpr std::string_view kHeader = "gpu_model,gpu_capacity_num,cpu_num,node_name\n";
  auto nodes = LoadSpotNodes(dir.Write(
      "spot.csv", std::string(kHeader) + "A10,1,64,0\nA100-SXM4-80GB,8,192,1\n,0,96,2\n"));
  ASSERT_OK(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].name, "1");
  EXPECT_EQ((*nodes)[1].cluster, "spot");
  EXPECT_EQ((*nodes)[1].gpu_model, "A100-SXM4-80GB");
  EXPECT_EQ((*nodes)[1].gpus, 8);

  ExpectInvalid(LoadSpotNodes(dir.Write("m.csv", std::string(kHeader) + "A10,1,64,0\n,2,64,1\n")),
                "m.csv:3: column gpu_model: is empty for a node with 2 GPUs");
  ExpectInvalid(LoadSpotNodes(dir.Write("n.csv", std::string(kHeader) + "A10,1,64,\n")),
                "n.csv:2: column node_name: is empty");
  ExpectInvalid(LoadSpotNodes(dir.Write("g.csv", std::string(kHeader) + "A10,-1,64,0\n")),
                "g.csv:2: column gpu_capacity_num");
}

TEST(LoadNodeListTest, TellsTheFormatFromTheHeader) {
  TempDir dir;
  auto openb =
      LoadNodeList(dir.Write("o.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,P100\n"));
  ASSERT_OK(openb);
  EXPECT_EQ(openb->front().cluster, "openb");
  auto spot =
      LoadNodeList(dir.Write("s.csv", "gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,4,8,x\n"));
  ASSERT_OK(spot);
  EXPECT_EQ(spot->front().cluster, "spot");
  auto tiresias = LoadNodeList(dir.Write(
      "t.csv",
      "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,2,4,8,8\n"));
  ASSERT_OK(tiresias);
  EXPECT_EQ(tiresias->size(), 2u);

  ExpectInvalid(LoadNodeList(dir.Write("u.csv", "host,gpus\nh1,8\n")),
                "u.csv:1: cannot tell the node list's format from its header");
  ExpectInvalid(LoadNodeList(dir.Write("c.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,0,\n")),
                "c.csv: no node with GPUs");
  EXPECT_THAT(LoadNodeList(dir.File("absent.csv")), StatusIs(StatusCode::kNotFound));
}

TEST(LoadTiresiasClusterSpecTest, ExpandsSwitchesAndNodes) {
  TempDir dir;
  constexpr std::string_view kHeader =
      "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n";
  auto nodes = LoadTiresiasClusterSpec(
      dir.Write("spec.csv", std::string(kHeader) + "2,3,4,40,256\n1,1,8,64,256"));
  ASSERT_OK(nodes);
  ASSERT_EQ(nodes->size(), 7u);
  EXPECT_EQ((*nodes)[0].name, "s0-n0");
  EXPECT_EQ((*nodes)[5].name, "s1-n2");
  EXPECT_EQ((*nodes)[5].gpus, 4);
  EXPECT_EQ((*nodes)[6].name, "s2-n0");
  EXPECT_EQ((*nodes)[6].gpus, 8);
  EXPECT_EQ((*nodes)[6].cluster, "tiresias");

  ExpectInvalid(LoadTiresiasClusterSpec(dir.Write("z.csv", std::string(kHeader) + "1,0,4,1,1\n")),
                "z.csv:2: column num_node_p_switch: must be >= 1");
  ExpectInvalid(
      LoadTiresiasClusterSpec(dir.Write("g.csv", std::string(kHeader) + "1,2,99999,1,1\n")),
      "g.csv:2: column num_gpu_p_node: 99999 is more than the 64 GPUs a node may have");
  ExpectInvalid(LoadTiresiasClusterSpec(dir.Write("e.csv", std::string(kHeader))),
                "no cluster rows");
}

TEST(LoadPhillyVcQuotasTest, CountsEightGpusPerNode) {
  TempDir dir;
  auto quotas = LoadPhillyVcQuotas(dir.Write("vc.csv", "vc,node num\n6214e9,64\n103959,8\n"));
  ASSERT_OK(quotas);
  ASSERT_EQ(quotas->size(), 2u);
  EXPECT_EQ((*quotas)[0].team, "6214e9");
  EXPECT_EQ((*quotas)[0].gpus, 512);
  EXPECT_EQ((*quotas)[1].gpus, 64);
  ExpectInvalid(LoadPhillyVcQuotas(dir.Write("v2.csv", "vc,nodes\na,1\n")),
                "missing column 'node num'");
  ExpectInvalid(LoadPhillyVcQuotas(dir.Write("v3.csv", "vc,node num\na,8\nb,4\na,2\n")),
                "v3.csv:4: column vc: 'a' is given twice (first on line 2)");
  ExpectInvalid(LoadPhillyVcQuotas(dir.Write("v4.csv", "vc,node num\na,0\n")),
                "v4.csv:2: column node num: must be >= 1");
  ExpectInvalid(LoadPhillyVcQuotas(dir.Write("v5.csv", "vc,node num\n")), "v5.csv: no vc rows");
}

TEST(LoadHeliosGpuNumbersTest, LastDayOrMaximum) {
  TempDir dir;
  std::string path = dir.Write("gpu.csv",
                               "date,vcA,vcB,total\n"
                               "2020-04-01,8,16,24\n"
                               "2020-04-02,32,0,32\n");
  auto last = LoadHeliosGpuNumbers(path, QuotaStatistic::kLastDay);
  ASSERT_OK(last);
  ASSERT_EQ(last->size(), 2u);
  EXPECT_EQ((*last)[0].team, "vcA");
  EXPECT_EQ((*last)[0].gpus, 32);
  EXPECT_EQ((*last)[1].gpus, 0);
  auto max = LoadHeliosGpuNumbers(path, QuotaStatistic::kMaxOverDays);
  ASSERT_OK(max);
  EXPECT_EQ((*max)[0].gpus, 32);
  EXPECT_EQ((*max)[1].gpus, 16);
}

// A VC wound down before the last day (0 GPUs there, as Venus's vcP2J) keeps its last
// allocation, not a quota of 0 that would hold all its requests under --hard-quota; a VC with
// 0 GPUs on every day gets no quota. The notes say both.
TEST(LoadHeliosGpuNumbersTest, LastAssignedNeverGivesAZeroQuota) {
  TempDir dir;
  std::string path = dir.Write("gpu.csv",
                               "date,vcA,vcB,vcC,vcD,total\n"
                               "2020-04-01,8,16,0,48,72\n"
                               "2020-04-02,32,8,0,0,40\n"
                               "2020-04-03,32,0,0,0,32\n");
  QuotaNotes notes;
  auto quotas = LoadHeliosGpuNumbers(path, QuotaStatistic::kLastAssigned, &notes);
  ASSERT_OK(quotas);
  ASSERT_EQ(quotas->size(), 3u);
  EXPECT_EQ((*quotas)[0].team, "vcA");
  EXPECT_EQ((*quotas)[0].gpus, 32);
  EXPECT_EQ((*quotas)[1].team, "vcB");
  EXPECT_EQ((*quotas)[1].gpus, 8);  // its last day with GPUs, 2020-04-02
  EXPECT_EQ((*quotas)[2].team, "vcD");
  EXPECT_EQ((*quotas)[2].gpus, 48);
  for (const TeamQuota& q : *quotas) EXPECT_GT(q.gpus, 0) << q.team;
  EXPECT_THAT(notes.rule, HasSubstr("on the last day it had any"));
  EXPECT_THAT(notes.from_earlier_day,
              ElementsAre("vcB 8 GPUs (2020-04-02)", "vcD 48 GPUs (2020-04-01)"));
  EXPECT_THAT(notes.left_out, ElementsAre("vcC"));
  // It is the default, and what a --quotas table of this form gets.
  auto by_default = LoadHeliosGpuNumbers(path);
  ASSERT_OK(by_default);
  EXPECT_EQ((*by_default)[1].gpus, 8);
  QuotaNotes table_notes;
  auto table = LoadQuotaTable(path, &table_notes);
  ASSERT_OK(table);
  EXPECT_EQ(table->size(), 3u);
  EXPECT_THAT(table_notes.left_out, ElementsAre("vcC"));
  // The last day's snapshot is still there for who asks for it, zeros included.
  auto last = LoadHeliosGpuNumbers(path, QuotaStatistic::kLastDay);
  ASSERT_OK(last);
  ASSERT_EQ(last->size(), 4u);
  EXPECT_EQ((*last)[1].gpus, 0);
}

TEST(LoadHeliosGpuNumbersTest, AVcNamedTwiceInTheHeaderIsAnError) {
  TempDir dir;
  ExpectInvalid(LoadHeliosGpuNumbers(dir.Write("d.csv",
                                               "date,vcA,vcB,vcC,vcB,total\n"
                                               "2020-04-01,8,8,8,8,32\n")),
                "d.csv:1: column 'vcB' appears twice in the header (columns 3 and 5)");
  ExpectInvalid(LoadQuotaTable(dir.Write("e.csv", "vcA,date,vcA,total\n8,2020-04-01,8,16\n")),
                "e.csv:1: column 'vcA' appears twice in the header (columns 1 and 3)");
}

TEST(LoadHeliosGpuNumbersTest, RejectsInconsistentRows) {
  TempDir dir;
  ExpectInvalid(LoadHeliosGpuNumbers(dir.Write("a.csv", "date,vcA,total\n2020-04-01,8,9\n")),
                "a.csv:2: column total: VC GPUs sum to 8 but total is 9");
  ExpectInvalid(
      LoadHeliosGpuNumbers(dir.Write("b.csv", "date,vcA,total\n2020-04-02,8,8\n2020-04-01,8,8\n")),
      "b.csv:3: column date: dates must increase");
  ExpectInvalid(LoadHeliosGpuNumbers(dir.Write("c.csv", "date,vcA,total\n")), "no data rows");
}

// Real shared traces (shared/traces, see its README). CTest sets EGS_TRACES_DIR; without it these
// tests skip.
class RealTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("EGS_TRACES_DIR");
    if (dir == nullptr || !std::filesystem::exists(dir)) GTEST_SKIP() << "EGS_TRACES_DIR unset";
    dir_ = dir;
  }
  std::string File(std::string_view relative) const {
    return (std::filesystem::path(dir_) / relative).string();
  }
  static void Report(const Trace& trace) {
    std::cout << trace.name << ": " << trace.jobs.size() << " jobs loaded";
    for (const SkipCount& s : trace.skipped) std::cout << ", " << s.count << " " << s.reason;
    std::cout << "\n";
  }

 private:
  std::string dir_;
};

TEST_F(RealTraceTest, Philly) {
  auto trace = LoadPhilly(File("philly-pollux/philly.csv"));
  ASSERT_OK(trace);
  Report(*trace);
  EXPECT_EQ(trace->jobs.size() + SkippedTotal(*trace), 82'247u);
  EXPECT_EQ(common::FormatTime(trace->jobs.front().submit), "2017-09-04T10:30:41Z");
  EXPECT_EQ(common::FormatTime(trace->jobs.back().submit), "2017-12-22T08:02:11Z");
  int max_gpus = 0;
  for (const TraceJob& job : trace->jobs) max_gpus = std::max(max_gpus, job.gpus);
  EXPECT_EQ(max_gpus, 128);
}

// The job-log loaders on the real Philly jobs, rewritten in their formats: a Helios
// cluster_log.csv (local times with a +08:00 offset, as Acme writes them) and an original-Philly
// JSON log (one attempt each). Both must give the Pollux loader's jobs, job for job (the first
// 20,000; they are sorted by submit, and so are the loaders' results).
TEST_F(RealTraceTest, JobLogsOfThePhillyJobsLoadAsThePolluxFile) {
  auto philly = LoadPhilly(File("philly-pollux/philly.csv"));
  ASSERT_OK(philly);
  philly->jobs.resize(20'000);  // enough real rows; the whole file takes long under ASan
  TempDir dir;
  std::string log =
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
      "queue\n";
  std::string json = "[";
  auto local = [](core::Time t, std::chrono::hours offset) {
    std::string s = common::FormatTime(t + offset);  // 2017-10-09T07:01:55Z
    return s.substr(0, 10) + " " + s.substr(11, 8);
  };
  for (std::size_t i = 0; i < philly->jobs.size(); ++i) {
    const TraceJob& j = philly->jobs[i];
    const long long seconds = std::chrono::duration_cast<std::chrono::seconds>(j.hold).count();
    ASSERT_EQ(common::Seconds(seconds), j.hold) << "Philly holds are whole seconds";
    const std::string at = local(j.submit, std::chrono::hours(8)) + "+08:00";
    log +=
        fmt::format("{},u,{},{},1,1,COMPLETED,{},{},,{},0\n", i, j.team, j.gpus, at, at, seconds);
    std::string gpus;
    for (int g = 0; g < j.gpus; ++g) gpus += fmt::format("{}\"gpu{}\"", g == 0 ? "" : ",", g % 8);
    json += fmt::format(
        "{}{{\"jobid\":\"{}\",\"vc\":\"{}\",\"status\":\"Pass\",\"user\":\"u\","
        "\"submitted_time\":\"{}\",\"attempts\":[{{\"start_time\":\"{}\",\"end_time\":\"{}\","
        "\"detail\":[{{\"ip\":\"m\",\"gpus\":[{}]}}]}}]}}",
        i == 0 ? "" : ",", i, j.team, local(j.submit, std::chrono::hours(0)),
        local(j.submit, std::chrono::hours(0)), local(j.submit + j.hold, std::chrono::hours(0)),
        gpus);
  }
  json += "]";
  auto helios = LoadJobLog(dir.Write("cluster_log.csv", log));
  ASSERT_OK(helios);
  auto original = LoadPhillyJobLog(dir.Write("cluster_job_log", json));
  ASSERT_OK(original);
  for (const Trace* t : {&*helios, &*original}) {
    ASSERT_EQ(t->jobs.size(), philly->jobs.size()) << t->name;
    for (std::size_t i = 0; i < t->jobs.size(); ++i) {
      const TraceJob& want = philly->jobs[i];
      const TraceJob& got = t->jobs[i];
      ASSERT_EQ(got.submit, want.submit) << t->name << " job " << i;
      ASSERT_EQ(got.gpus, want.gpus) << t->name << " job " << i;
      ASSERT_EQ(got.hold, want.hold) << t->name << " job " << i;
      ASSERT_EQ(got.team, want.team) << t->name << " job " << i;
    }
  }
}

TEST_F(RealTraceTest, OpenbPods) {
  auto trace = LoadOpenbPods(File("alibaba-gpu-v2023/openb_pod_list_default.csv"));
  ASSERT_OK(trace);
  Report(*trace);
  EXPECT_EQ(trace->jobs.size() + SkippedTotal(*trace), 8'152u);
  EXPECT_EQ(SkippedCount(*trace, kSkipCpuOnly), 1'088u);  // num_gpu 0 in SOURCE.md
}

TEST_F(RealTraceTest, Tiresias) {
  auto trace = LoadTiresias(File("tiresias/60_job.csv"));
  ASSERT_OK(trace);
  Report(*trace);
  EXPECT_EQ(trace->jobs.size(), 60u);
  EXPECT_TRUE(trace->skipped.empty());
}

TEST_F(RealTraceTest, Fleets) {
  auto nodes = LoadOpenbNodes(File("alibaba-gpu-v2023/openb_node_list_gpu_node.csv"));
  ASSERT_OK(nodes);
  int gpus = 0;
  for (const FleetNodeSpec& node : *nodes) gpus += node.gpus;
  EXPECT_EQ(nodes->size(), 1'213u);
  EXPECT_EQ(gpus, 6'212);
  auto all = LoadOpenbNodes(File("alibaba-gpu-v2023/openb_node_list_all_node.csv"));
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 1'213u);  // the 310 CPU-only nodes are left out

  auto spec = LoadTiresiasClusterSpec(File("tiresias/n32g4.csv"));
  ASSERT_OK(spec);
  EXPECT_EQ(spec->size(), 32u);
  EXPECT_EQ(spec->front().gpus, 4);

  // 4,278 nodes and 10,412 GPUs in SOURCE.md; every node there has GPUs.
  auto spot = LoadNodeList(File("alibaba-spot-gpu-v2026/node_info_df.csv"));
  ASSERT_OK(spot);
  gpus = 0;
  std::set<std::string> models;
  for (const FleetNodeSpec& node : *spot) {
    gpus += node.gpus;
    models.insert(node.gpu_model);
  }
  EXPECT_EQ(spot->size(), 4'278u);
  EXPECT_EQ(gpus, 10'412);
  EXPECT_EQ(models.size(), 6u);
  auto openb = LoadNodeList(File("alibaba-gpu-v2023/openb_node_list_gpu_node.csv"));
  ASSERT_OK(openb);
  EXPECT_EQ(openb->size(), 1'213u);
}

TEST_F(RealTraceTest, Quotas) {
  auto philly = LoadPhillyVcQuotas(File("helios/philly_vc.csv"));
  ASSERT_OK(philly);
  EXPECT_EQ(philly->size(), 11u);
  for (const char* cluster : {"Venus", "Earth"}) {
    const std::string path = File(std::string("helios/") + cluster + "_cluster_gpu_number.csv");
    auto last_day = LoadHeliosGpuNumbers(path, QuotaStatistic::kLastDay);
    ASSERT_OK(last_day);
    EXPECT_EQ(last_day->size(), 25u) << cluster;
    int total = 0;
    for (const TeamQuota& q : *last_day) total += q.gpus;
    EXPECT_EQ(total, std::string(cluster) == "Venus" ? 1'080 : 1'208) << cluster;
    // The --quotas rule: no VC that ever had GPUs gets a quota of 0.
    QuotaNotes notes;
    auto quotas = LoadQuotaTable(path, &notes);
    ASSERT_OK(quotas);
    for (const TeamQuota& q : *quotas) EXPECT_GT(q.gpus, 0) << cluster << " " << q.team;
    EXPECT_EQ(quotas->size() + notes.left_out.size(), 25u) << cluster;
    if (std::string(cluster) == "Venus") {
      EXPECT_THAT(notes.left_out, ElementsAre("vcIya"));  // 0 GPUs on every day
      EXPECT_THAT(notes.from_earlier_day, ::testing::Contains("vcP2J 48 GPUs (2020-07-06)"));
    }
  }
}

}  // namespace
}  // namespace egs::sim
