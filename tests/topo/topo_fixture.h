// Loading the topology fixtures (tests/topo/fixtures) in the topology tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "topo/cluster.h"
#include "topo/system.h"
#include "topo/xml.h"

namespace loom {

inline std::string fixturePath(const std::string& name) { return std::string(LOOM_TOPO_FIXTURES) + "/" + name; }

inline std::shared_ptr<const TopoSystem> loadFixture(const std::string& name) {
  std::unique_ptr<XmlNode> root;
  EXPECT_EQ(xmlLoadFile(fixturePath(name), &root), loomSuccess) << loomGetLastError(nullptr);
  std::unique_ptr<TopoSystem> sys;
  EXPECT_EQ(TopoSystem::build(*root, name, &sys), loomSuccess) << loomGetLastError(nullptr);
  return std::shared_ptr<const TopoSystem>(std::move(sys));
}

inline int node(const TopoSystem& s, const std::string& name) {
  int n = s.findName(name);
  EXPECT_GE(n, 0) << name;
  return n;
}

inline PathType pathType(const TopoSystem& s, const std::string& a, const std::string& b) {
  return s.path(node(s, a), node(s, b)).type;
}

}  // namespace loom
