#include "ir/attr_decl.h"

namespace nee {

const AttrDecl* AttrSchema::Find(const std::string& name) const {
  for (const AttrDecl& d : attrs)
    if (d.name == name) return &d;
  return nullptr;
}

std::string AttrSchema::Label() const {
  return (domain.empty() ? "" : domain + ".") + op + "-" + std::to_string(since_version);
}

}  // namespace nee
