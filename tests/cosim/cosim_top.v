// Test harness for the cocotb co-simulation of the generated OpenNIC plugin
// (tests/cosim/test_cosim.py). It instantiates `squeezenic_250mhz` exactly as written
// by `squeezenic-hw generate` (NUM_PHYS_FUNC = 1) and only renames wires:
// cocotbext-axi's AxiStreamBus wants one `tuser`, so each stream's
// tuser_size/src/dst become `<stream>_tuser` = {dst, src, size} (size in bits
// 15:0), as OpenNIC's own flattened example wrapper does.
//
// `loopback` = 1 ties the adapter TX stream to the adapter RX stream, as a cable
// from the CMAC port back to itself would; `tx_tready` and the `rx_*` inputs are
// then ignored. It is an input, not a parameter, so that one compiled model
// serves both kinds of test. `wire_*` always shows the adapter TX stream with
// the tready the plugin sees (for a monitor).
`timescale 1ns / 1ps
`default_nettype none

module cosim_top (
  input  wire         loopback,
  input  wire         axil_aclk,
  input  wire         axis_aclk,
  input  wire [15:0]  mod_rstn,
  output wire [15:0]  mod_rst_done,

  input  wire         s_axil_awvalid,
  input  wire [31:0]  s_axil_awaddr,
  output wire         s_axil_awready,
  input  wire         s_axil_wvalid,
  input  wire [31:0]  s_axil_wdata,
  output wire         s_axil_wready,
  output wire         s_axil_bvalid,
  output wire [1:0]   s_axil_bresp,
  input  wire         s_axil_bready,
  input  wire         s_axil_arvalid,
  input  wire [31:0]  s_axil_araddr,
  output wire         s_axil_arready,
  output wire         s_axil_rvalid,
  output wire [31:0]  s_axil_rdata,
  output wire [1:0]   s_axil_rresp,
  input  wire         s_axil_rready,

  input  wire         h2c_tvalid,
  input  wire [511:0] h2c_tdata,
  input  wire [63:0]  h2c_tkeep,
  input  wire         h2c_tlast,
  input  wire [47:0]  h2c_tuser,
  output wire         h2c_tready,

  output wire         c2h_tvalid,
  output wire [511:0] c2h_tdata,
  output wire [63:0]  c2h_tkeep,
  output wire         c2h_tlast,
  output wire [47:0]  c2h_tuser,
  input  wire         c2h_tready,

  output wire         tx_tvalid,
  output wire [511:0] tx_tdata,
  output wire [63:0]  tx_tkeep,
  output wire         tx_tlast,
  output wire [47:0]  tx_tuser,
  input  wire         tx_tready,

  output wire         wire_tvalid,
  output wire [511:0] wire_tdata,
  output wire [63:0]  wire_tkeep,
  output wire         wire_tlast,
  output wire [47:0]  wire_tuser,
  output wire         wire_tready,

  input  wire         rx_tvalid,
  input  wire [511:0] rx_tdata,
  input  wire [63:0]  rx_tkeep,
  input  wire         rx_tlast,
  input  wire [47:0]  rx_tuser,
  output wire         rx_tready
);

  // the plugin's receive side of the adapter: the rx_* inputs, or the wire itself
  wire         adap_rx_tvalid;
  wire [511:0] adap_rx_tdata;
  wire [63:0]  adap_rx_tkeep;
  wire         adap_rx_tlast;
  wire [47:0]  adap_rx_tuser;
  wire         adap_rx_tready;
  wire         adap_tx_tready;

  assign adap_rx_tvalid = loopback ? tx_tvalid : rx_tvalid;
  assign adap_rx_tdata  = loopback ? tx_tdata  : rx_tdata;
  assign adap_rx_tkeep  = loopback ? tx_tkeep  : rx_tkeep;
  assign adap_rx_tlast  = loopback ? tx_tlast  : rx_tlast;
  assign adap_rx_tuser  = loopback ? tx_tuser  : rx_tuser;
  assign adap_tx_tready = loopback ? adap_rx_tready : tx_tready;
  assign rx_tready      = loopback ? 1'b0 : adap_rx_tready;

  assign wire_tvalid = tx_tvalid;
  assign wire_tdata  = tx_tdata;
  assign wire_tkeep  = tx_tkeep;
  assign wire_tlast  = tx_tlast;
  assign wire_tuser  = tx_tuser;
  assign wire_tready = adap_tx_tready;

  squeezenic_250mhz dut (
    .s_axil_awvalid                (s_axil_awvalid),
    .s_axil_awaddr                 (s_axil_awaddr),
    .s_axil_awready                (s_axil_awready),
    .s_axil_wvalid                 (s_axil_wvalid),
    .s_axil_wdata                  (s_axil_wdata),
    .s_axil_wready                 (s_axil_wready),
    .s_axil_bvalid                 (s_axil_bvalid),
    .s_axil_bresp                  (s_axil_bresp),
    .s_axil_bready                 (s_axil_bready),
    .s_axil_arvalid                (s_axil_arvalid),
    .s_axil_araddr                 (s_axil_araddr),
    .s_axil_arready                (s_axil_arready),
    .s_axil_rvalid                 (s_axil_rvalid),
    .s_axil_rdata                  (s_axil_rdata),
    .s_axil_rresp                  (s_axil_rresp),
    .s_axil_rready                 (s_axil_rready),

    .s_axis_qdma_h2c_tvalid        (h2c_tvalid),
    .s_axis_qdma_h2c_tdata         (h2c_tdata),
    .s_axis_qdma_h2c_tkeep         (h2c_tkeep),
    .s_axis_qdma_h2c_tlast         (h2c_tlast),
    .s_axis_qdma_h2c_tuser_size    (h2c_tuser[15:0]),
    .s_axis_qdma_h2c_tuser_src     (h2c_tuser[31:16]),
    .s_axis_qdma_h2c_tuser_dst     (h2c_tuser[47:32]),
    .s_axis_qdma_h2c_tready        (h2c_tready),

    .m_axis_qdma_c2h_tvalid        (c2h_tvalid),
    .m_axis_qdma_c2h_tdata         (c2h_tdata),
    .m_axis_qdma_c2h_tkeep         (c2h_tkeep),
    .m_axis_qdma_c2h_tlast         (c2h_tlast),
    .m_axis_qdma_c2h_tuser_size    (c2h_tuser[15:0]),
    .m_axis_qdma_c2h_tuser_src     (c2h_tuser[31:16]),
    .m_axis_qdma_c2h_tuser_dst     (c2h_tuser[47:32]),
    .m_axis_qdma_c2h_tready        (c2h_tready),

    .m_axis_adap_tx_250mhz_tvalid      (tx_tvalid),
    .m_axis_adap_tx_250mhz_tdata       (tx_tdata),
    .m_axis_adap_tx_250mhz_tkeep       (tx_tkeep),
    .m_axis_adap_tx_250mhz_tlast       (tx_tlast),
    .m_axis_adap_tx_250mhz_tuser_size  (tx_tuser[15:0]),
    .m_axis_adap_tx_250mhz_tuser_src   (tx_tuser[31:16]),
    .m_axis_adap_tx_250mhz_tuser_dst   (tx_tuser[47:32]),
    .m_axis_adap_tx_250mhz_tready      (adap_tx_tready),

    .s_axis_adap_rx_250mhz_tvalid      (adap_rx_tvalid),
    .s_axis_adap_rx_250mhz_tdata       (adap_rx_tdata),
    .s_axis_adap_rx_250mhz_tkeep       (adap_rx_tkeep),
    .s_axis_adap_rx_250mhz_tlast       (adap_rx_tlast),
    .s_axis_adap_rx_250mhz_tuser_size  (adap_rx_tuser[15:0]),
    .s_axis_adap_rx_250mhz_tuser_src   (adap_rx_tuser[31:16]),
    .s_axis_adap_rx_250mhz_tuser_dst   (adap_rx_tuser[47:32]),
    .s_axis_adap_rx_250mhz_tready      (adap_rx_tready),

    .mod_rstn                      (mod_rstn),
    .mod_rst_done                  (mod_rst_done),
    .axil_aclk                     (axil_aclk),
    .ref_clk_100mhz                (1'b0),
    .axis_aclk                     (axis_aclk)
  );

endmodule

`default_nettype wire
