#include "topo/xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "base/error.h"

namespace loom {

const std::string* XmlNode::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

std::string XmlNode::attrOr(const std::string& key, const std::string& fallback) const {
  const std::string* v = attr(key);
  return v ? *v : fallback;
}

void XmlNode::set(const std::string& key, const std::string& value) {
  for (auto& kv : attrs)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  attrs.emplace_back(key, value);
}

XmlNode* XmlNode::add(const std::string& childName) {
  children.push_back(std::make_unique<XmlNode>());
  children.back()->name = childName;
  return children.back().get();
}

std::unique_ptr<XmlNode> XmlNode::clone() const {
  auto c = std::make_unique<XmlNode>();
  c->name = name;
  c->attrs = attrs;
  c->line = line;
  for (const auto& ch : children) c->children.push_back(ch->clone());
  return c;
}

namespace {

constexpr int kMaxDepth = 64;     // a topology is a few levels deep; deeper input is hostile
constexpr size_t kMaxNodes = 1u << 20;

loomResult_t convert(xmlNode* in, const std::string& source, int depth, size_t* count, XmlNode* out) {
  if (depth > kMaxDepth)
    return setError(loomInvalidArgument, "%s:%ld: elements nested deeper than %d", source.c_str(), xmlGetLineNo(in),
                    kMaxDepth);
  out->name = reinterpret_cast<const char*>(in->name);
  out->line = static_cast<int>(xmlGetLineNo(in));
  for (xmlAttr* a = in->properties; a != nullptr; a = a->next) {
    xmlChar* v = xmlNodeListGetString(in->doc, a->children, 1);
    out->attrs.emplace_back(reinterpret_cast<const char*>(a->name), v ? reinterpret_cast<const char*>(v) : "");
    xmlFree(v);
  }
  for (xmlNode* c = in->children; c != nullptr; c = c->next) {
    if (c->type == XML_TEXT_NODE) {
      for (const xmlChar* p = c->content; p && *p; ++p)
        if (!isspace(*p))
          return setError(loomInvalidArgument, "%s:%ld: unexpected text inside <%s> (topology elements hold only attributes)",
                          source.c_str(), xmlGetLineNo(c), out->name.c_str());
      continue;
    }
    if (c->type != XML_ELEMENT_NODE) continue;  // comments, processing instructions
    if (++*count > kMaxNodes)
      return setError(loomInvalidArgument, "%s: more than %zu elements", source.c_str(), kMaxNodes);
    LOOM_CHECK(convert(c, source, depth + 1, count, out->add("")));
  }
  return loomSuccess;
}

void escape(std::ostringstream& os, const std::string& s) {
  for (char c : s) {
    switch (c) {
      case '&': os << "&amp;"; break;
      case '<': os << "&lt;"; break;
      case '>': os << "&gt;"; break;
      case '"': os << "&quot;"; break;
      default: os << c;
    }
  }
}

void write(std::ostringstream& os, const XmlNode& n, int depth) {
  os << std::string(2 * depth, ' ') << '<' << n.name;
  for (const auto& kv : n.attrs) {
    os << ' ' << kv.first << "=\"";
    escape(os, kv.second);
    os << '"';
  }
  if (n.children.empty()) {
    os << "/>\n";
    return;
  }
  os << ">\n";
  for (const auto& c : n.children) write(os, *c, depth + 1);
  os << std::string(2 * depth, ' ') << "</" << n.name << ">\n";
}

}  // namespace

loomResult_t xmlParse(const std::string& text, const std::string& source, std::unique_ptr<XmlNode>* root) {
  static std::once_flag once;
  std::call_once(once, [] { xmlInitParser(); });
  xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
  if (ctxt == nullptr) return setError(loomSystemError, "libxml2: cannot allocate a parser");
  // No network, no entity substitution (no external or billion-laughs expansion).
  xmlDocPtr doc = xmlCtxtReadMemory(ctxt, text.data(), static_cast<int>(text.size()), source.c_str(), nullptr,
                                    XML_PARSE_NONET | XML_PARSE_NOWARNING | XML_PARSE_NOERROR);
  if (doc == nullptr) {
    const xmlError* e = xmlCtxtGetLastError(ctxt);
    std::string msg = e && e->message ? e->message : "not well-formed";
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    loomResult_t r = setError(loomInvalidArgument, "%s:%d: malformed XML: %s", source.c_str(), e ? e->line : 0,
                              msg.c_str());
    xmlFreeParserCtxt(ctxt);
    return r;
  }
  if (doc->intSubset != nullptr || doc->extSubset != nullptr) {
    // Topology files have no use for a DTD, and entity definitions are how XML bombs are built.
    loomResult_t r = setError(loomInvalidArgument, "%s:%ld: a DOCTYPE is not allowed in a topology file",
                              source.c_str(), doc->intSubset ? xmlGetLineNo(reinterpret_cast<xmlNodePtr>(doc->intSubset)) : 1L);
    xmlFreeDoc(doc);
    xmlFreeParserCtxt(ctxt);
    return r;
  }
  auto out = std::make_unique<XmlNode>();
  size_t count = 1;
  loomResult_t r = convert(xmlDocGetRootElement(doc), source, 0, &count, out.get());
  xmlFreeDoc(doc);
  xmlFreeParserCtxt(ctxt);
  if (r == loomSuccess) *root = std::move(out);
  return r;
}

loomResult_t xmlLoadFile(const std::string& path, std::unique_ptr<XmlNode>* root) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return setError(loomInvalidArgument, "cannot read topology file %s", path.c_str());
  std::ostringstream ss;
  ss << f.rdbuf();
  if (ss.str().size() > (64u << 20)) return setError(loomInvalidArgument, "%s: over 64 MiB", path.c_str());
  return xmlParse(ss.str(), path, root);
}

std::string xmlWrite(const XmlNode& root) {
  std::ostringstream os;
  write(os, root, 0);
  return os.str();
}

}  // namespace loom
