// The report page in a real browser: pages made from fixture reports (one report, two machines, a
// GPU and a CPU report, time-to-train runs, a history) opened in headless Chromium with the
// network cut. Each must show every case, label every chart, and render no NaN, undefined or
// empty chart. A screenshot of each goes to html_pages/NAME.png in the test's working folder
// (the build's tests/ folder under ctest), beside the page itself.
#include <nlohmann/json.hpp>

#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

struct PageFixture {
  std::string name;                  // the screenshot's name
  std::vector<std::string> reports;  // relative to the source tree
  bool history = false;              // drawn from a history of three runs of the first report
};

std::string source_path(const std::string& relative) {
  return std::string(TRAINBENCH_SOURCE_DIR) + "/" + relative;
}

std::string escaped(const std::string& text) {  // as the page writes text
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// The value of attribute `name` on the rendered page's <body>, or "" where it has none. (No
// <regex>: g++ 12 warns of its internals at -O2 with the sanitizers.)
std::string body_attribute(const std::string& dom, const std::string& name) {
  const std::size_t body = dom.find("<body");
  if (body == std::string::npos) return "";
  const std::size_t tag_end = dom.find('>', body);
  const std::string tag = dom.substr(body, tag_end == std::string::npos ? tag_end : tag_end - body);
  const std::string key = " " + name + "=\"";
  const std::size_t at = tag.find(key);
  if (at == std::string::npos) return "";
  const std::size_t value = at + key.size();
  return tag.substr(value, tag.find('"', value) - value);
}

class HtmlPage : public Cli, public testing::WithParamInterface<PageFixture> {
 protected:
  // Chromium, headless, without a network: in a namespace with none where one can be made,
  // and its resolver and proxy pointed nowhere in any case.
  std::string chromium(const std::string& arguments) const {
    const bool own_network = std::system("unshare -n true > /dev/null 2>&1") == 0;
    return fmt::format(
        "{}timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic "
        "--no-first-run --disable-background-networking --disable-component-update "
        "--disable-sync --host-resolver-rules='MAP * ~NOTFOUND' --proxy-server=127.0.0.1:9 "
        "--user-data-dir={} {} 2>> {}",
        own_network ? "unshare -n " : "", (dir_ / "profile").string(), arguments,
        (dir_ / "chromium.err").string());
  }

  // The page's arguments: the fixture's reports, or a history of three runs of the first one.
  std::vector<std::string> page_inputs(const PageFixture& fixture) {
    std::vector<std::string> paths;
    for (const std::string& report : fixture.reports) paths.push_back(source_path(report));
    if (!fixture.history) return paths;
    const std::string db = (dir_ / "history.db").string();
    std::vector<std::string> add = {"history", "--db", db, "add"};
    for (int i = 0; i < 3; ++i) {
      nlohmann::json report = nlohmann::json::parse(slurp(paths[0]));
      report["started_at"] = fmt::format("2026-10-2{}T12:00:00Z", i);
      add.push_back((dir_ / fmt::format("run{}.json", i)).string());
      std::ofstream(add.back()) << report.dump();
    }
    EXPECT_EQ(run(add).exit_code, 0);
    return {"--history", db};
  }
};

TEST_P(HtmlPage, ShowsEveryCaseWithLabelledChartsInChromium) {
  const PageFixture& fixture = GetParam();
  ASSERT_EQ(std::system("command -v chromium > /dev/null"), 0)
      << "chromium is not installed: scripts/setup.sh --test installs it";
  const fs::path out = fs::current_path() / "html_pages";
  fs::create_directories(out);
  const std::string html = (out / (fixture.name + ".html")).string();
  std::vector<std::string> args = {"report", "--html", html};
  for (const std::string& input : page_inputs(fixture)) args.push_back(input);
  const Outcome made = run(args);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string page = slurp(html);
  EXPECT_EQ(page.find("http://"), std::string::npos);  // one file: nothing to fetch
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);

  const std::string dom_path = (dir_ / "dom.html").string();
  ASSERT_EQ(std::system(chromium(fmt::format("--dump-dom file://{} > {}", html, dom_path)).c_str()),
            0)
      << slurp(dir_ / "chromium.err");
  const std::string dom = slurp(dom_path);
  const std::string charts = body_attribute(dom, "data-charts");
  ASSERT_FALSE(charts.empty()) << "the page's script did not run: " << dom.substr(0, 2000);
  EXPECT_GT(std::stoi(charts), 0);
  EXPECT_EQ(body_attribute(dom, "data-charts-rendered"), charts) << "a chart drew nothing";
  EXPECT_EQ(body_attribute(dom, "data-charts-labelled"), charts) << "a chart lacks its labels";
  EXPECT_EQ(body_attribute(dom, "data-bad-values"), "none");
  for (const std::string& report : fixture.reports) {
    const nlohmann::json parsed = nlohmann::json::parse(slurp(source_path(report)));
    for (const nlohmann::json& result : parsed["results"])
      EXPECT_NE(dom.find(escaped(result["workload"].get<std::string>())), std::string::npos)
          << result["workload"] << " is not on the page made from " << report;
  }

  const fs::path screenshot = out / (fixture.name + ".png");
  fs::remove(screenshot);
  ASSERT_EQ(std::system(chromium(fmt::format("--hide-scrollbars --window-size=1400,5000 "
                                             "--screenshot={} file://{} > /dev/null",
                                             screenshot.string(), html))
                            .c_str()),
            0)
      << slurp(dir_ / "chromium.err");
  EXPECT_GT(fs::file_size(screenshot), 10'000u) << screenshot;
  std::cout << "screenshot: " << screenshot.string() << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, HtmlPage,
    testing::Values(PageFixture{"one_report", {"tests/reports/data/baseline.json"}},
                    PageFixture{"two_machines",
                                {"tests/reports/data/baseline.json",
                                 "tests/reports/data/other_machine.json"}},
                    PageFixture{"gpu_and_cpu",
                                {"bench/results/h200/trainbench-gpu-suite.json",
                                 "tests/reports/data/cpu_models.json"}},
                    PageFixture{"time_to_train", {"tests/reports/data/time_to_train.json"}},
                    PageFixture{"history", {"tests/reports/data/baseline.json"}, true}),
    [](const testing::TestParamInfo<PageFixture>& info) { return info.param.name; });

}  // namespace
}  // namespace tb
