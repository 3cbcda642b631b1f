// The NCCL-format XML: every fixture survives dump -> load -> dump byte for byte, and malformed or
// absurd input is refused with the line it is on.
#include <gtest/gtest.h>

#include "topo/system.h"
#include "topo/topo_fixture.h"
#include "topo/xml.h"

namespace loom {
namespace {

class RoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTrip, DumpLoadDumpIsByteStable) {
  std::unique_ptr<XmlNode> first;
  ASSERT_EQ(xmlLoadFile(fixturePath(GetParam()), &first), loomSuccess) << loomGetLastError(nullptr);
  std::unique_ptr<TopoSystem> sys;
  ASSERT_EQ(TopoSystem::build(*first, GetParam(), &sys), loomSuccess) << loomGetLastError(nullptr);
  const std::string dump1 = xmlWrite(*sys->xml);
  std::unique_ptr<XmlNode> again;
  ASSERT_EQ(xmlParse(dump1, "dump1", &again), loomSuccess) << loomGetLastError(nullptr);
  std::unique_ptr<TopoSystem> sys2;
  ASSERT_EQ(TopoSystem::build(*again, "dump1", &sys2), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(xmlWrite(*sys2->xml), dump1);
  EXPECT_EQ(sys2->nodes.size(), sys->nodes.size());
  EXPECT_EQ(sys2->links.size(), sys->links.size());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RoundTrip,
                         ::testing::Values("a100_nvswitch.xml", "l20_pcie.xml", "twosocket_pcie.xml", "vm_flat.xml",
                                           "h100_mig.xml", "partial_pci_only.xml"));

TEST(Xml, WriterEscapesAttributeValues) {
  XmlNode n;
  n.name = "system";
  n.set("host", "a<b>&\"c\"");
  std::unique_ptr<XmlNode> back;
  ASSERT_EQ(xmlParse(xmlWrite(n), "escaped", &back), loomSuccess);
  EXPECT_EQ(back->attrOr("host", ""), "a<b>&\"c\"");
}

struct BadInput {
  const char* what;
  const char* xml;
  const char* expect;  // in the error message, after "bad.xml:LINE:"
  int line;
};

class Refused : public ::testing::TestWithParam<BadInput> {};

TEST_P(Refused, WithALineNumber) {
  const BadInput& b = GetParam();
  std::unique_ptr<XmlNode> root;
  std::unique_ptr<TopoSystem> sys;
  loomResult_t r = xmlParse(b.xml, "bad.xml", &root);
  if (r == loomSuccess) r = TopoSystem::build(*root, "bad.xml", &sys);
  ASSERT_EQ(r, loomInvalidArgument) << b.what;
  const std::string msg = loomGetLastError(nullptr);
  EXPECT_NE(msg.find("bad.xml:" + std::to_string(b.line) + ":"), std::string::npos) << b.what << ": " << msg;
  EXPECT_NE(msg.find(b.expect), std::string::npos) << b.what << ": " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Topology, Refused,
    ::testing::Values(
        BadInput{"unclosed", "<system>\n<cpu numaid=\"0\">\n</system>\n", "malformed XML", 4},
        BadInput{"garbage", "\n\nnot xml at all", "malformed XML", 3},
        BadInput{"empty", "", "malformed XML", 1},
        BadInput{"wrong root", "<topology/>", "expected <system>", 1},
        BadInput{"unknown element", "<system>\n<cpu numaid=\"0\">\n<widget/>\n</cpu>\n</system>", "unknown element <widget>", 3},
        BadInput{"misplaced gpu", "<system>\n<cpu numaid=\"0\">\n<gpu dev=\"0\"/>\n</cpu>\n</system>", "<gpu> cannot appear inside <cpu>", 3},
        BadInput{"text", "<system>\n<cpu numaid=\"0\">hello</cpu>\n</system>", "unexpected text", 2},
        BadInput{"no numaid", "<system>\n<cpu/>\n</system>", "needs the attribute numaid", 2},
        BadInput{"numaid not a number", "<system>\n<cpu numaid=\"zero\"/>\n</system>", "is not a number", 2},
        BadInput{"duplicate numaid", "<system>\n<cpu numaid=\"0\"/>\n<cpu numaid=\"0\"/>\n</system>", "appears twice", 3},
        BadInput{"bad busid", "<system>\n<cpu numaid=\"0\">\n<pci busid=\"zz\"/>\n</cpu>\n</system>", "not a PCI address", 3},
        BadInput{"cycle: a bus id twice",
                 "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x060400\">\n"
                 "<pci busid=\"0000:01:00.0\" class=\"0x030200\"/>\n</pci>\n</cpu>\n</system>",
                 "cycle", 4},
        BadInput{"absurd width", "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_width=\"3\"/>\n</cpu>\n</system>", "lane count", 3},
        BadInput{"absurd speed", "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"9000 GT/s\" link_width=\"16\"/>\n</cpu>\n</system>", "out of range", 3},
        BadInput{"absurd net speed",
                 "<system>\n<cpu numaid=\"0\">\n<nic>\n<net name=\"x\" speed=\"-5\"/>\n</nic>\n</cpu>\n</system>", "out of range", 4},
        BadInput{"absurd nvlink count",
                 "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\">\n<gpu dev=\"0\" sm=\"80\">\n"
                 "<nvlink target=\"0000:02:00.0\" count=\"1000\"/>\n</gpu>\n</pci>\n</cpu>\n</system>",
                 "out of range", 5},
        BadInput{"dangling nvlink",
                 "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\">\n<gpu dev=\"0\" sm=\"80\">\n"
                 "<nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x030200\"/>\n</gpu>\n</pci>\n</cpu>\n</system>",
                 "dangling", 5},
        BadInput{"nvlink to itself",
                 "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\">\n<gpu dev=\"0\" sm=\"80\">\n"
                 "<nvlink target=\"0000:01:00.0\" count=\"2\"/>\n</gpu>\n</pci>\n</cpu>\n</system>",
                 "to itself", 5},
        BadInput{"duplicate gpu dev",
                 "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\">\n<gpu dev=\"0\"/>\n</pci>\n"
                 "<pci busid=\"0000:02:00.0\" class=\"0x030200\">\n<gpu dev=\"0\"/>\n</pci>\n</cpu>\n</system>",
                 "appears twice", 7}),
    [](const ::testing::TestParamInfo<BadInput>& p) {
      std::string n = p.param.what;
      for (char& c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(Xml, DeepNestingIsRefused) {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "<pci>";
  for (int i = 0; i < 200; ++i) deep += "</pci>";
  std::unique_ptr<XmlNode> root;
  EXPECT_EQ(xmlParse(deep, "deep.xml", &root), loomInvalidArgument);
}

TEST(Xml, DocumentTypeDefinitionsAreRefused) {
  // A "billion laughs" document: entities that expand to 10^9 copies.  Refused before any expansion.
  std::string doc = "<?xml version=\"1.0\"?>\n<!DOCTYPE system [<!ENTITY lol0 \"lol\">";
  for (int i = 1; i < 10; ++i) {
    doc += "<!ENTITY lol" + std::to_string(i) + " \"";
    for (int j = 0; j < 10; ++j) doc += "&lol" + std::to_string(i - 1) + ";";
    doc += "\">";
  }
  doc += "]>\n<system host=\"&lol9;\"/>";
  std::unique_ptr<XmlNode> root;
  EXPECT_EQ(xmlParse(doc, "lolz.xml", &root), loomInvalidArgument);
  EXPECT_EQ(root, nullptr);
  // A harmless DTD is refused too: topology files never need one.
  EXPECT_EQ(xmlParse("<!DOCTYPE system [<!ENTITY a \"b\">]>\n<system host=\"&a;\"/>", "dtd.xml", &root),
            loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("DOCTYPE"), std::string::npos) << loomGetLastError(nullptr);
}

TEST(Xml, MissingFileIsAClearError) {
  std::unique_ptr<XmlNode> root;
  EXPECT_EQ(xmlLoadFile("/nonexistent/topo.xml", &root), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("/nonexistent/topo.xml"), std::string::npos);
}

}  // namespace
}  // namespace loom
