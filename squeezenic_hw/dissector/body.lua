-- The SqueezeNIC dissector's code. `squeezenic-hw dissector` writes it after the SPEC table
-- it makes from squeezenic_hw/spec: every field offset, codec, flag, width and bypass reason
-- below comes from SPEC, so the script follows the Python spec (docs/wire-format.md). This
-- file alone does not load.

local S = SPEC
local proto = Proto(S.proto, "SqueezeNIC")

-- ---- unsigned arithmetic without a bit library (Lua 5.2 to 5.4) ------------------------

local function bit_of(value, bit)          -- bit: a power of two
    return math.floor(value / bit) % 2 == 1
end

local function band(value, mask)
    local out, bit = 0, 1
    while bit <= mask do
        if bit_of(mask, bit) and bit_of(value, bit) then out = out + bit end
        bit = bit * 2
    end
    return out
end

local function ceil_div(a, b)
    return math.floor((a + b - 1) / b)
end

-- a positive NaN, so that it prints as "nan" (0/0 is negative on x86)
local NAN = -(0 / 0)

-- the value of the IEEE-754 binary float of `exponent` and `fraction` bits whose bits are u
local function float_from_bits(u, exponent, fraction)
    local bias = 2 ^ (exponent - 1) - 1
    local sign = u >= 2 ^ (exponent + fraction) and -1 or 1
    local e, m = math.floor(u / 2 ^ fraction) % 2 ^ exponent, u % 2 ^ fraction
    if e == 2 ^ exponent - 1 then return m == 0 and sign * math.huge or NAN end
    if e == 0 then return sign * m * 2 ^ (1 - bias - fraction) end
    return sign * (1 + m / 2 ^ fraction) * 2 ^ (e - bias)
end

local function f32_from_bits(u) return float_from_bits(u, 8, 23) end
local function f16_from_bits(u) return float_from_bits(u, 5, 10) end

-- ---- the spec's tables, indexed --------------------------------------------------------

local START = S.fields.version.offset      -- the SqueezeNIC fields' first byte in a frame
local CODEC_BY_ID, CODEC_BY_NAME, CODEC_NAMES = {}, {}, {}
for _, c in ipairs(S.codecs) do
    CODEC_BY_ID[c.id] = c
    CODEC_BY_NAME[c.name] = c
    CODEC_NAMES[c.id] = c.name
end

-- a codec's parameter is valid: in its range, or 0 for a codec without one
local function valid_param(codec, param)
    if not codec.param_range then return param == 0 end
    return codec.param_range[1] <= param and param <= codec.param_range[2]
end

-- k, the kept values of a threshold payload of `length` bytes, or nil when the length
-- cannot be right (spec.threshold.values_count)
local function values_count(n, layout, length)
    if layout == S.threshold.bitmap then
        local rest = length - ceil_div(n, 8)
        if rest >= 0 and rest % S.f32_bytes == 0 then return rest / S.f32_bytes end
    elseif layout == S.threshold.index_list then
        local entry = S.index_bytes + S.f32_bytes
        if length % entry == 0 then return length / entry end
    end
    return nil
end

-- ---- fields ----------------------------------------------------------------------------

local F, field_list = {}, {}
local function field(key, make, ...)
    F[key] = make(S.proto .. "." .. key, ...)
    field_list[#field_list + 1] = F[key]
end

field("version", ProtoField.uint8, "Version", base.DEC)
field("codec", ProtoField.uint8, "Codec", base.DEC, CODEC_NAMES)
field("codec_name", ProtoField.string, "Codec name")
field("param", ProtoField.uint8, "Param", base.DEC)
field("flags", ProtoField.uint8, "Flags", base.HEX)
field("flags.encoded", ProtoField.bool, "Encoded", 8, nil, S.flags.encoded)
field("flags.stochastic", ProtoField.bool, "Stochastic", 8, nil, S.flags.stochastic)
field("flags.flush", ProtoField.bool, "Flush", 8, nil, S.flags.flush)
field("flags.gather", ProtoField.bool, "Gather", 8, nil, S.flags.gather)
field("flags.reserved", ProtoField.uint8, "Reserved", base.HEX, nil, S.flags.reserved)
field("flags.reduce_reserved", ProtoField.uint8, "Reserved", base.HEX, nil,
      S.flags.reduce_reserved)
field("n", ProtoField.uint16, "n", base.DEC)
field("scale", ProtoField.float, "Scale")
field("aux", ProtoField.float, "Aux")
field("seed", ProtoField.uint32, "Seed", base.DEC)
field("contributions", ProtoField.uint8, "Contributions", base.DEC)
field("width", ProtoField.uint8, "Width", base.DEC)
field("nodes", ProtoField.uint8, "Nodes", base.DEC)
field("origin", ProtoField.uint8, "Origin", base.DEC)
field("offset", ProtoField.uint32, "Offset", base.DEC)
field("payload", ProtoField.none, "Payload")
field("payload_length", ProtoField.uint32, "Payload length", base.DEC)
field("expected_length", ProtoField.uint32, "Expected frame length", base.DEC)
field("bits", ProtoField.uint8, "Bits per element", base.DEC)
field("layout", ProtoField.string, "Layout")
field("kept", ProtoField.uint32, "Kept values", base.DEC)
field("bitmap", ProtoField.bytes, "Bitmap")
field("index", ProtoField.uint16, "Index", base.DEC)
field("value", ProtoField.float, "Kept value")
field("element", ProtoField.float, "Element")
field("lane", ProtoField.string, "Judged by")
field("bypass", ProtoField.string, "Bypass reason")
field("reduce_bypass", ProtoField.string, "Reduce bypass reason")

proto.fields = field_list

-- ---- expert info: one per bypass reason, named as its counter --------------------------

local E = {bypass = {}, reduce = {}, sparse = {}}
local expert_list = {}
local function add_expert(where, key, abbrev, text, note)
    local severity = note and expert.severity.NOTE or expert.severity.WARN
    local group = note and expert.group.PROTOCOL or expert.group.MALFORMED
    E[where][key] = ProtoExpert.new(S.proto .. "." .. abbrev, text, group, severity)
    expert_list[#expert_list + 1] = E[where][key]
end
for _, list in ipairs({S.reasons.transport, S.reasons.tx, S.reasons.rx}) do
    for _, reason in ipairs(list) do
        if not E.bypass[reason] then
            add_expert("bypass", reason, "bypass." .. reason,
                       S.counter_prefix .. reason .. ": " .. S.reason_text[reason],
                       S.not_squeezenic[reason])
        end
    end
end
for _, reason in ipairs(S.reduce_bypass_reasons) do
    add_expert("reduce", reason, "reduce_bypass." .. reason,
               S.reduce_counters[reason] .. ": " .. S.reduce_reason_text[reason], false)
end
for _, counter in ipairs({S.sparse_counters.count, S.sparse_counters.layout}) do
    add_expert("sparse", counter, counter, counter .. ": " .. S.sparse_error_text[counter], true)
end
proto.experts = expert_list

-- ---- preferences -----------------------------------------------------------------------

local LANES = {{1, "auto", 0}, {2, "tx", 1}, {3, "rx", 2}}
local LANE_NAMES = {[0] = "auto", [1] = "tx", [2] = "rx"}
proto.prefs.port = Pref.uint("SqueezeNIC UDP port", S.default_port,
    "The NIC's SqueezeNIC UDP destination port: frames to it are dissected and judged "
    .. "against it (Decode As adds other ports)")
proto.prefs.codecs = Pref.string("Codecs built in", table.concat(S.default_codecs, ","),
    "Comma-separated codec names or ids the NIC's lanes are built with")
proto.prefs.lane = Pref.enum("Judge as", 0,
    "Whose rules judge a version 1 frame: auto (the TX lane's for a host frame, "
    .. "encoded = 0; the RX lane's for a wire frame), tx or rx", LANES, false)
proto.prefs.elements = Pref.uint("Elements decoded", S.default_elements,
    "How many of a frame's first elements to decode (0: none)")
proto.prefs.judge_all = Pref.bool("Judge every frame", false,
    "Give every other frame of the capture (ARP, other ports, fragments...) the reason "
    .. "the NIC would bypass it")

proto.prefs.ring_nodes = Pref.uint("Ring: nodes N", 0,
    "The ring size of the node that receives the reduce frames (2 to 16): they are judged "
    .. "as that node judges them, its expected offsets followed frame by frame; 0: by the "
    .. "checks every node makes alike")
proto.prefs.ring_rank = Pref.uint("Ring: rank", 0, "The receiving node's rank (0 to N - 1)")
proto.prefs.ring_elements = Pref.uint("Ring: tensor elements E", 0,
    "The tensor's elements, which the ring cuts into N chunks")
proto.prefs.ring_codec = Pref.string("Ring: codec", "raw",
    "The ring's codec name or id and parameter (fixed:8)")
proto.prefs.ring_scale = Pref.string("Ring: scale", "1.0",
    "The ring's scale: a number, or its fp32 bits (0x3f800000)")
proto.prefs.ring_aux = Pref.string("Ring: aux", "1.0",
    "The ring's aux: a number, or its fp32 bits")
proto.prefs.ring_stochastic = Pref.bool("Ring: stochastic", false,
    "The ring rounds stochastically (for a codec that can)")
proto.prefs.ring_enabled = Pref.bool("Ring: reduce enabled", true,
    "The receiving node's reduce enable: a disabled node bypasses every reduce frame")

local registered_port
local built = {}
-- the receiving node (nil: none described, ring_error says why when the preferences
-- describe one badly), its verdicts by frame number and the offsets it expects next
local ring, ring_error
local ring_verdicts, expected = {}, {}

-- the fp32 bits of a number (rounded to fp32) or of 0x-prefixed bits
local function f32_bits_of(text)
    local hex = string.match(text, "^%s*0[xX](%x+)%s*$")
    if hex then return tonumber(hex, 16) end
    local value = tonumber(text)
    return value and Struct.unpack("<I4", Struct.pack("<f", value))
end

local function read_ring()
    local p = proto.prefs
    if p.ring_nodes == 0 then return nil end
    if p.ring_nodes < S.nodes[1] or p.ring_nodes > S.nodes[2] then
        return nil, "ring nodes must be " .. S.nodes[1] .. " to " .. S.nodes[2]
    end
    if p.ring_rank >= p.ring_nodes then return nil, "ring rank must be below nodes" end
    local name, param = string.match(p.ring_codec, "^%s*([%w_]+)%s*:?%s*(%d*)%s*$")
    local codec = name and (CODEC_BY_NAME[name] or CODEC_BY_ID[tonumber(name) or -1])
    param = tonumber(param) or 0
    local widths = codec and S.reduce_width[codec.id]
    if not (widths and widths[param]) then
        return nil, "ring codec " .. p.ring_codec .. " cannot be reduced"
    end
    local scale, aux = f32_bits_of(p.ring_scale), f32_bits_of(p.ring_aux)
    if not (scale and aux) then return nil, "ring scale and aux must be numbers" end
    return {nodes = p.ring_nodes, rank = p.ring_rank, elements = p.ring_elements,
            codec = codec.id, param = param, scale_bits = scale, aux_bits = aux,
            stochastic = p.ring_stochastic and codec.stochastic, enabled = p.ring_enabled,
            width = widths[param][p.ring_nodes]}
end

local function read_codecs(text)
    local set = {}
    for item in string.gmatch(text, "[^,%s]+") do
        local codec = CODEC_BY_NAME[item] or CODEC_BY_ID[tonumber(item) or -1]
        if codec then set[codec.id] = true end
    end
    return set
end

local function apply_prefs()
    local udp = DissectorTable.get("udp.port")
    if registered_port ~= proto.prefs.port then
        if registered_port then udp:remove(registered_port, proto) end
        registered_port = proto.prefs.port
        udp:add(registered_port, proto)
    end
    built = read_codecs(proto.prefs.codecs)
    ring, ring_error = read_ring()
    ring_verdicts, expected = {}, {}
end
proto.prefs_changed = apply_prefs

-- ---- the NIC's checks, on the frame's first bytes --------------------------------------

local function be(b, f)
    local v = 0
    for i = 0, f.length - 1 do v = v * 256 + b[f.offset + i] end
    return v
end

local function le(b, f)
    local v = 0
    for i = f.length - 1, 0, -1 do v = v * 256 + b[f.offset + i] end
    return v
end

-- the IPv4 header's first byte (the Ethernet header's length) and the UDP header's
local IP_START, UDP_START = S.fields.ip_vihl.offset, S.fields.udp_src.offset

-- RFC 1071 sum of the IPv4 header with its checksum field as zero
local function ipv4_checksum(b)
    local total = 0
    for i = IP_START, UDP_START - 1, 2 do
        if i ~= S.fields.ip_checksum.offset then total = total + b[i] * 256 + b[i + 1] end
    end
    while total > 0xFFFF do total = total % 0x10000 + math.floor(total / 0x10000) end
    return 0xFFFF - total
end

-- What the checks read: the header's fields and the frame's length (the caller adds the
-- NIC's port).
local function frame_facts(b, size)
    local F_ = S.fields
    local h = {
        size = size,
        ethertype = be(b, F_.ethertype), vihl = b[F_.ip_vihl.offset],
        frag = be(b, F_.ip_frag), protocol = b[F_.ip_proto.offset],
        dst_port = be(b, F_.udp_dst), ip_checksum = be(b, F_.ip_checksum),
        ip_total_length = be(b, F_.ip_total_length), udp_length = be(b, F_.udp_length),
        version = b[F_.version.offset], codec = b[F_.codec.offset],
        param = b[F_.param.offset], flags = b[F_.flags.offset], n = le(b, F_.n),
        checksum = ipv4_checksum(b),
        scale_bits = le(b, F_.scale), aux_bits = le(b, F_.aux), offset = le(b, F_.offset),
    }
    for name, f in pairs(S.reduce_fields) do h[name] = b[f.offset] end
    h.encoded = bit_of(h.flags, S.flags.encoded)
    h.gather = bit_of(h.flags, S.flags.gather)
    h.stochastic = bit_of(h.flags, S.flags.stochastic)
    h.info = CODEC_BY_ID[h.codec]
    return h
end

-- the frame length a dense codec's wire frame of n elements has
local function dense_length(codec, param, n)
    return S.header_len + ceil_div(n * codec.bits[param], 8)
end

-- One function per bypass reason, true when the frame fails it; the order is SPEC's.
local CHECKS = {
    short_frame = function(h) return h.size < S.header_len end,
    not_ipv4 = function(h) return h.ethertype ~= S.ethertype_ipv4 end,
    ip_options = function(h) return h.vihl ~= S.ipv4_vihl end,
    fragmented = function(h) return band(h.frag, S.fragment_mask) ~= 0 end,
    not_udp = function(h) return h.protocol ~= S.proto_udp end,
    other_port = function(h) return h.dst_port ~= h.port end,
    ip_checksum = function(h) return h.checksum ~= h.ip_checksum end,
    ip_length = function(h) return h.ip_total_length ~= h.size - IP_START end,
    udp_length = function(h) return h.udp_length ~= h.size - UDP_START end,
    version = function(h) return h.version ~= S.version end,
    reserved_flags = function(h) return band(h.flags, S.flags.reserved) ~= 0 end,
    already_encoded = function(h) return h.encoded end,
    not_encoded = function(h) return not h.encoded end,
    codec = function(h) return not (built[h.codec] and h.info) end,
    param = function(h, lane)
        if not valid_param(h.info, h.param) then return true end
        -- a host frame's threshold layout is the encoder's to choose: it says 0
        return lane == "tx" and h.info.variable and h.param ~= 0
    end,
    zero_n = function(h) return h.n == 0 end,
    length = function(h, lane)
        if lane == "tx" then return h.size ~= S.header_len + S.f32_bytes * h.n end
        if h.info.variable then
            return values_count(h.n, h.param, h.size - S.header_len) == nil
        end
        return h.size ~= dense_length(h.info, h.param, h.n)
    end,
}

-- section 8.4's checks every node makes alike (spec.reduce.classify_reduce_frame)
local function reduce_width(h)
    local by_param = S.reduce_width[h.codec]
    return by_param and by_param[h.param] and by_param[h.param][h.nodes]
end

local REDUCE_CHECKS = {
    length = function(h)
        return h.n == 0 or h.size ~= S.header_len + ceil_div(h.n * h.width, 8)
    end,
    flags = function(h)
        return band(h.flags, S.flags.reduce_reserved) ~= 0 or not h.encoded
    end,
    settings = function(h)
        if not (h.info and S.reduce_width[h.codec] and valid_param(h.info, h.param)) then
            return true
        end
        return h.stochastic and not h.info.stochastic
    end,
    nodes = function(h) return h.nodes < S.nodes[1] or h.nodes > S.nodes[2] end,
    width = function(h) return h.width ~= reduce_width(h) end,
    phase = function(h)
        if h.origin >= h.nodes then return true end
        if h.gather then return h.contributions ~= h.nodes end
        return h.contributions < 1 or h.contributions >= h.nodes
    end,
}

-- every reason of SPEC has its check, and every check a reason of SPEC
local function check_table(checks, reasons, what)
    local known = {}
    for _, list in pairs(reasons) do
        for _, reason in ipairs(list) do
            known[reason] = true
            assert(checks[reason], "squeezenic: no check for the " .. what .. " " .. reason)
        end
    end
    for reason in pairs(checks) do
        assert(known[reason], "squeezenic: a check for an unknown " .. what .. " " .. reason)
    end
end
check_table(CHECKS, S.reasons, "bypass reason")
check_table(REDUCE_CHECKS, {S.reduce_reasons}, "reduce bypass reason")

-- The receiving node's checks (section 8.4, reference.reduce_rx.ReduceReceiver).
local function chunk_bounds(chunk)             -- spec.reduce.chunk_bounds
    local size = ceil_div(ring.elements, ring.nodes)
    local lo = math.min(chunk * size, ring.elements)
    return lo, math.min(lo + size, ring.elements)
end

local function expected_key(h)
    return h.origin .. (h.gather and ":gather" or ":reduce")
end

local function expected_offset(h)
    return expected[expected_key(h)] or (chunk_bounds(h.origin))
end

local NODE_CHECKS = {
    length = REDUCE_CHECKS.length,
    flags = REDUCE_CHECKS.flags,
    settings = function(h)
        return h.codec ~= ring.codec or h.param ~= ring.param or h.stochastic ~= ring.stochastic
            or h.scale_bits ~= ring.scale_bits or h.aux_bits ~= ring.aux_bits
    end,
    nodes = function(h) return h.nodes ~= ring.nodes end,
    width = function(h) return h.width ~= ring.width end,
    phase = function(h)
        local n, k, origin = ring.nodes, h.contributions, h.origin
        if origin >= n then return true end
        -- the node after the finishing one is the gather's last: it never receives its own
        if h.gather then return k ~= n or origin == (ring.rank + 1) % n end
        return k < 1 or k >= n or (origin + k) % n ~= ring.rank
    end,
    offset = function(h)
        local lo, hi = chunk_bounds(h.origin)
        return h.offset < lo or h.offset + h.n > hi or h.offset > expected_offset(h)
    end,
    duplicate = function(h) return h.offset < expected_offset(h) end,
}
check_table(NODE_CHECKS, {S.node_reduce_reasons}, "reduce bypass reason")

-- The node's verdict on a reduce frame, made once per frame in capture order (Wireshark's
-- first pass): a frame taken moves its chunk and phase's expected offset on.
local function node_verdict(h, number)
    if ring_verdicts[number] then return ring_verdicts[number] end
    if not ring.enabled then return {lane = "reduce", reduce = S.reduce_disabled} end
    local verdict = {lane = "reduce", taken = true}
    for _, reason in ipairs(S.node_reduce_reasons) do
        if NODE_CHECKS[reason](h) then
            verdict = {lane = "reduce", reduce = reason}
            break
        end
    end
    if verdict.taken then
        local _, hi = chunk_bounds(h.origin)
        local stop = h.offset + h.n
        expected[expected_key(h)] = stop ~= hi and stop or nil   -- complete: its start again
    end
    ring_verdicts[number] = verdict
    return verdict
end

-- The verdict: {lane = "tx"|"rx"|"reduce", bypass = reason or nil, reduce = reason or nil}.
local function judge(h, number)
    for _, reason in ipairs(S.reasons.transport) do
        if CHECKS[reason](h) then return {lane = nil, bypass = reason} end
    end
    local chosen = LANE_NAMES[proto.prefs.lane]
    local lane = chosen
    if chosen == "auto" then lane = h.encoded and "rx" or "tx" end
    -- reduce frames come from the wire: a TX lane bypasses them by their version
    if h.version == S.reduce_version and chosen ~= "tx" then
        if ring then return node_verdict(h, number) end
        for _, reason in ipairs(S.reduce_reasons) do
            if REDUCE_CHECKS[reason](h) then return {lane = "reduce", reduce = reason} end
        end
        return {lane = "reduce", ring_error = ring_error}
    end
    for _, reason in ipairs(S.reasons[lane]) do
        if CHECKS[reason](h, lane) then return {lane = lane, bypass = reason} end
    end
    return {lane = lane}
end

-- The frame's first bytes as a table indexed from 0, or nil when the capture holds fewer
-- of them than the checks read.
local frame_field = Field.new("frame")

local function frame_bytes(size)
    local info = frame_field()
    if not info then return nil end
    local range = info.range
    local want = math.min(size, S.header_len)
    if range:len() < want then return nil end
    local ba, b = range:range(0, want):bytes(), {}
    for i = 0, want - 1 do b[i] = ba:get_index(i) end
    for i = want, S.header_len - 1 do b[i] = 0 end
    return b
end

-- ---- the tree --------------------------------------------------------------------------

local function add_verdict(tree, verdict)
    if verdict.lane then tree:add(F.lane, verdict.lane):set_generated() end
    if verdict.bypass then
        local item = tree:add(F.bypass, verdict.bypass)
        item:set_generated()
        item:add_proto_expert_info(E.bypass[verdict.bypass])
    elseif verdict.reduce then
        local item = tree:add(F.reduce_bypass, verdict.reduce)
        item:set_generated()
        item:add_proto_expert_info(E.reduce[verdict.reduce])
    end
    if verdict.ring_error then tree:add("[Ring preferences ignored: " .. verdict.ring_error .. "]") end
end

local LANE_TEXT = {
    tx = "the TX lane encodes it",
    rx = "the RX lane decodes it",
    reduce = "a node takes it if its settings, rank and expected offset agree",
}

local function verdict_text(verdict)
    if verdict.bypass then return "bypassed: " .. S.counter_prefix .. verdict.bypass end
    if verdict.reduce then
        return "bypassed: " .. S.reduce_counters[verdict.reduce]
    end
    if verdict.taken then
        return "node " .. ring.rank .. " takes it (" .. S.reduce_counters.taken .. ")"
    end
    return LANE_TEXT[verdict.lane]
end

-- `how many` of a frame's first elements, each a float field over the bytes it came from
local function add_elements(tree, count, first_index, element_at)
    for i = 0, count - 1 do
        local range, value, code = element_at(i)
        local item = tree:add(F.element, range, value)
        item:set_text(string.format("Element %d: %.6g (tensor index %d%s)", i, value,
                                    (first_index + i) % 2 ^ 32,
                                    code and string.format(", code 0x%x", code) or ""))
    end
end

-- bits [i*b, (i+1)*b) of the payload, read least significant bit first
local function code_at(payload, ba, i, b)
    local first = i * b
    local byte0, shift = math.floor(first / 8), first % 8
    local count = ceil_div(shift + b, 8)
    local v = 0
    for k = count - 1, 0, -1 do v = v * 256 + ba:get_index(byte0 + k) end
    return math.floor(v / 2 ^ shift) % 2 ^ b, payload:range(byte0, count)
end

local DECODERS = {
    raw = function(c) return f32_from_bits(c) end,
    fp16 = function(c) return f16_from_bits(c) end,
    bf16 = function(c) return f32_from_bits(c * 2 ^ 16) end,
    fixed = function(c, x)
        if c >= 2 ^ (x.param - 1) then c = c - 2 ^ x.param end
        return c * x.aux              -- exact in a double; the float field rounds it once
    end,
    qsgd = function(c, x)
        local top = 2 ^ (x.param - 1)
        local v = (c % top) * x.aux
        if c >= top and v == v then v = -v end
        return v
    end,
    sign = function(c, x) return c == 1 and x.aux or x.scale end,
    natural = function(c)
        local sign, e = c >= 2 ^ 8 and -1 or 1, c % 2 ^ 8
        if e == 0 then return sign * 0.0 end
        if e == 255 then return sign * math.huge end
        return sign * 2 ^ (e - 127)
    end,
}
for _, c in ipairs(S.codecs) do
    assert(c.variable or DECODERS[c.name], "squeezenic: no decoder for codec " .. c.name)
end
for name in pairs(DECODERS) do
    assert(CODEC_BY_NAME[name], "squeezenic: a decoder for an unknown codec " .. name)
end

-- A threshold payload: its layout, kept values, decoded first elements and the RX lane's
-- sparse error counters (reference.threshold.decode_payload's rule).
local function add_threshold(tree, payload, h, decode_count, n_range)
    local length = payload:len()
    local k = values_count(h.n, h.param, length)
    tree:add(F.layout, S.threshold_layout_names[h.param] or "?"):set_generated()
    if not k then return end
    tree:add(F.kept, k):set_generated()
    local ba = payload:bytes()
    local head = h.param == S.threshold.bitmap and ceil_div(h.n, 8) or S.index_bytes * k
    local keep, set, layout_error = {}, 0, false
    local shown = math.min(k, decode_count)
    if h.param == S.threshold.bitmap then
        tree:add(F.bitmap, payload:range(0, head))
        for j = 0, head - 1 do
            local byte = ba:get_index(j)
            for bit = 0, 7 do
                if bit_of(byte, 2 ^ bit) then
                    local pos = 8 * j + bit
                    if pos < h.n then keep[pos] = true; set = set + 1
                    else layout_error = true end
                end
            end
        end
    else
        local used_max = -1
        for j = 0, k - 1 do
            local at = S.index_bytes * j
            local idx = ba:get_index(at) + 256 * ba:get_index(at + 1)
            if j < shown then tree:add_le(F.index, payload:range(at, S.index_bytes)) end
            if idx < h.n and idx > used_max then
                keep[idx] = true; set = set + 1; used_max = idx
            else
                layout_error = true
            end
        end
    end
    for j = 0, shown - 1 do
        tree:add_le(F.value, payload:range(head + S.f32_bytes * j, S.f32_bytes))
    end
    if set ~= k then tree:add_proto_expert_info(E.sparse[S.sparse_counters.count]) end
    if layout_error then tree:add_proto_expert_info(E.sparse[S.sparse_counters.layout]) end
    local rank = 0
    add_elements(tree, math.min(h.n, decode_count), h.offset, function(i)
        if keep[i] then
            rank = rank + 1
            if rank <= k then
                local range = payload:range(head + S.f32_bytes * (rank - 1), S.f32_bytes)
                return range, range:le_float()
            end
        end
        -- an element not kept: the bitmap byte that says so, or the index list (or, when
        -- nothing is kept, the frame's n)
        if h.param == S.threshold.bitmap then
            return payload:range(math.floor(i / 8), 1), 0.0
        end
        if k > 0 then return payload:range(0, head), 0.0 end
        return n_range, 0.0
    end)
end

local function rel(f)                      -- a field's offset in the dissected buffer
    return f.offset - START
end

local function add_header(tree, tvb, h)
    local function add(key, f, little)
        if rel(f) + f.length > tvb:len() then return nil end
        local range = tvb(rel(f), f.length)
        return little and tree:add_le(F[key], range) or tree:add(F[key], range)
    end
    local SF = S.fields
    add("version", SF.version)
    add("codec", SF.codec)
    if rel(SF.codec) < tvb:len() then
        tree:add(F.codec_name, h.info and h.info.name or "unknown"):set_generated()
    end
    add("param", SF.param)
    local flags = add("flags", SF.flags)
    if flags then
        local range = tvb(rel(SF.flags), 1)
        flags:add(F["flags.encoded"], range)
        flags:add(F["flags.stochastic"], range)
        if h.version == S.reduce_version then
            flags:add(F["flags.gather"], range)
            flags:add(F["flags.reduce_reserved"], range)
        else
            flags:add(F["flags.flush"], range)
            flags:add(F["flags.reserved"], range)
        end
    end
    add("n", SF.n, true)
    add("scale", SF.scale, true)
    add("aux", SF.aux, true)
    if h.version == S.reduce_version then
        for _, name in ipairs(S.reduce_field_order) do add(name, S.reduce_fields[name]) end
    else
        add("seed", SF.seed, true)
    end
    add("offset", SF.offset, true)
end

-- the payload's size and layout, and its first elements when the NIC would take the frame
local function add_payload(tree, tvb, h, verdict)
    local head = S.header_len - START
    if tvb:len() < head then return end
    local payload = tvb(head)
    local item = tree:add(F.payload, payload)
    item:append_text(string.format(": %d bytes", payload:len()))
    item:add(F.payload_length, payload:len()):set_generated()
    local codec = h.info
    local bits, expected
    if verdict.lane == "tx" then
        bits, expected = 8 * S.f32_bytes, S.header_len + S.f32_bytes * h.n
    elseif verdict.lane == "reduce" then
        bits, expected = h.width, S.header_len + ceil_div(h.n * h.width, 8)
    elseif codec and not codec.variable and valid_param(codec, h.param) then
        bits, expected = codec.bits[h.param], dense_length(codec, h.param, h.n)
    end
    if expected then item:add(F.expected_length, expected):set_generated() end
    if bits then item:add(F.bits, bits):set_generated() end
    local decode_count = proto.prefs.elements
    local takes = verdict.lane and not verdict.bypass and not verdict.reduce
    local x = {param = h.param,
               scale = tvb(rel(S.fields.scale), S.fields.scale.length):le_float(),
               aux = tvb(rel(S.fields.aux), S.fields.aux.length):le_float()}
    if verdict.lane == "rx" and codec and codec.variable then
        if takes then
            add_threshold(item, payload, h, decode_count,
                          tvb(rel(S.fields.n), S.fields.n.length))
        else
            item:add(F.layout, S.threshold_layout_names[h.param] or "?"):set_generated()
        end
        return
    end
    if not takes or verdict.lane == "reduce" then return end
    local count = math.min(h.n, decode_count)
    if verdict.lane == "tx" then
        add_elements(item, count, h.offset, function(i)
            local range = payload:range(S.f32_bytes * i, S.f32_bytes)
            return range, range:le_float()
        end)
    else
        local ba, decode, b = payload:bytes(), DECODERS[codec.name], codec.bits[h.param]
        add_elements(item, count, h.offset, function(i)
            local code, range = code_at(payload, ba, i, b)
            return range, decode(code, x), code
        end)
    end
end

local function summary(h, verdict)
    local kind = verdict.lane == "reduce" and "reduce frame"
        or (h.encoded and "wire frame" or "host frame")
    local codec = h.info and h.info.name or ("codec " .. h.codec)
    if h.info and h.info.param_range then codec = codec .. ":" .. h.param end
    local text = string.format("v%d %s, %s, n %d, offset %d", h.version, kind, codec, h.n,
                               h.offset)
    if verdict.lane == "reduce" then
        text = text .. string.format(", %s %d/%d from node %d",
                                     h.gather and "gather" or "reduce", h.contributions,
                                     h.nodes, h.origin)
    end
    return text
end

-- the port the checks compare the destination port with: the preference's, or a port that
-- Decode As gives to this dissector
local own_dissector
local function nic_port(dst_port)
    own_dissector = own_dissector or Dissector.get(S.proto)
    local chosen = DissectorTable.get("udp.port"):get_dissector(dst_port)
    if chosen and tostring(chosen) == tostring(own_dissector) then return dst_port end
    return proto.prefs.port
end

-- The SqueezeNIC fields as the dissected buffer has them, which is where the NIC reads
-- them unless a VLAN tag, IPv6 or IP options moved them (0 where the buffer ends early).
local function buffer_view(tvb)
    local view = {}
    local function read(name, f)
        local at = rel(f)
        if at + f.length > tvb:len() then
            view[name] = 0
        else                       -- the SqueezeNIC fields are little-endian
            view[name] = tvb(at, f.length):le_uint()
        end
    end
    for _, name in ipairs({"version", "codec", "param", "flags", "n", "offset"}) do
        read(name, S.fields[name])
    end
    for name, f in pairs(S.reduce_fields) do read(name, f) end
    view.info = CODEC_BY_ID[view.codec]
    view.encoded = bit_of(view.flags, S.flags.encoded)
    view.gather = bit_of(view.flags, S.flags.gather)
    return view
end

local last_judged = -1

function proto.dissector(tvb, pinfo, tree)
    last_judged = pinfo.number
    pinfo.cols.protocol = "SqueezeNIC"
    local size = pinfo.len
    local item = tree:add(proto, tvb())
    local b = frame_bytes(size)
    local h, verdict
    if b then
        h = frame_facts(b, size)
        h.port = nic_port(h.dst_port)
        verdict = judge(h, pinfo.number)
    end
    local view = buffer_view(tvb)
    add_header(item, tvb, view)
    if not verdict then
        item:append_text(": capture too short to judge")
        return
    end
    add_verdict(item, verdict)
    add_payload(item, tvb, view, verdict)
    item:append_text(", " .. summary(view, verdict) .. " — " .. verdict_text(verdict))
    pinfo.cols.info = "SqueezeNIC " .. summary(view, verdict)
        .. (verdict.bypass and (" [" .. S.counter_prefix .. verdict.bypass .. "]") or "")
        .. (verdict.reduce and (" [" .. S.reduce_counters[verdict.reduce] .. "]") or "")
end

-- Every other frame, when asked: the reason the NIC would bypass it.
local judge_proto = Proto(S.proto .. "_nic", "SqueezeNIC NIC verdict")

function judge_proto.dissector(tvb, pinfo, tree)
    if not proto.prefs.judge_all or last_judged == pinfo.number then return end
    local size = pinfo.len
    local b = frame_bytes(size)
    if not b then return end
    local h = frame_facts(b, size)
    h.port = nic_port(h.dst_port)
    local verdict = judge(h, pinfo.number)
    local item = tree:add(proto, tvb(0, 0))
    item:set_text("SqueezeNIC: " .. verdict_text(verdict))
    add_verdict(item, verdict)
end

register_postdissector(judge_proto)
DissectorTable.get("udp.port"):add_for_decode_as(proto)
apply_prefs()
