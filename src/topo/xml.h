// A small element tree for topology files: what NCCL's topology XML holds (elements with ordered
// attributes, no text).  libxml2 parses; the writer is ours so that dump -> load -> dump is byte-stable.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom.h"

namespace loom {

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in file order
  std::vector<std::unique_ptr<XmlNode>> children;
  int line = 0;  // where it was read from (0: made in memory)

  const std::string* attr(const std::string& key) const;
  std::string attrOr(const std::string& key, const std::string& fallback) const;
  void set(const std::string& key, const std::string& value);  // replaces or appends
  XmlNode* add(const std::string& childName);
  std::unique_ptr<XmlNode> clone() const;
};

// Parses `text` (`source` names it in messages).  Errors carry the line: "file.xml:12: ...".
loomResult_t xmlParse(const std::string& text, const std::string& source, std::unique_ptr<XmlNode>* root);
loomResult_t xmlLoadFile(const std::string& path, std::unique_ptr<XmlNode>* root);
// Two-space indentation, attributes in stored order, `<x/>` for childless elements.
std::string xmlWrite(const XmlNode& root);

}  // namespace loom
