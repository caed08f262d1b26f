<?xml version="1.0" encoding="UTF-8"?>
<!-- Licensed under the Apache License, Version 2.0; see LICENSE.

     Renders a module document of docs/manual/mod (modulesynopsis.dtd) as
     Markdown, the form the repository shows and that reads as plain text:
     a header table, the summary and sections, an index of directives, then
     each directive with Description, Syntax, Default, Context, Status,
     Module and Compatibility.  `make manual` writes docs/manual/mod/*.md
     with xsltproc; `make check-manual` fails when they are not current. -->
<xsl:stylesheet version="1.0"
                xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
<xsl:output method="text" encoding="UTF-8"/>
<xsl:strip-space elements="modulesynopsis directivesynopsis summary section
                           usage note example ul contextlist modulelist"/>

<xsl:variable name="upper" select="'ABCDEFGHIJKLMNOPQRSTUVWXYZ'"/>
<xsl:variable name="lower" select="'abcdefghijklmnopqrstuvwxyz'"/>
<xsl:variable name="nl" select="'&#10;'"/>
<!-- Modules this manual documents; any other links to httpd's manual. -->
<xsl:variable name="local" select="' prefork_buckets prefork_buckets_common mod_bucket_status '"/>
<xsl:variable name="httpd" select="'https://httpd.apache.org/docs/2.4/mod/'"/>

<!-- ============================================================ page -->

<xsl:template match="/modulesynopsis">
  <xsl:text># </xsl:text>
  <xsl:choose>
    <xsl:when test="name = 'prefork_buckets_common'">Common MPM directives, as the prefork MPM with listener buckets implements them</xsl:when>
    <xsl:when test="status = 'MPM'">Apache MPM <xsl:value-of select="name"/></xsl:when>
    <xsl:otherwise>Apache module <xsl:value-of select="name"/></xsl:otherwise>
  </xsl:choose>
  <xsl:value-of select="concat($nl, $nl)"/>
  <xsl:text>&lt;!-- Generated from mod/</xsl:text>
  <xsl:value-of select="name"/>
  <xsl:text>.xml by style/markdown.xsl (make manual): edit the XML. --&gt;&#10;&#10;</xsl:text>
  <xsl:text>| | |&#10;|---|---|&#10;</xsl:text>
  <xsl:call-template name="row">
    <xsl:with-param name="label" select="'Description'"/>
    <xsl:with-param name="node" select="description"/>
  </xsl:call-template>
  <xsl:call-template name="row">
    <xsl:with-param name="label" select="'Status'"/>
    <xsl:with-param name="node" select="status"/>
  </xsl:call-template>
  <xsl:if test="identifier">
    <xsl:text>| Module identifier | `</xsl:text>
    <xsl:value-of select="normalize-space(identifier)"/>
    <xsl:text>` |&#10;</xsl:text>
  </xsl:if>
  <xsl:if test="sourcefile">
    <xsl:text>| Source file | `</xsl:text>
    <xsl:value-of select="normalize-space(sourcefile)"/>
    <xsl:text>` |&#10;</xsl:text>
  </xsl:if>
  <xsl:value-of select="$nl"/>
  <xsl:apply-templates select="compatibility"/>
  <xsl:text>## Summary&#10;&#10;</xsl:text>
  <xsl:apply-templates select="summary/*"/>
  <xsl:call-template name="seealso"/>
  <xsl:apply-templates select="section"/>
  <xsl:if test="directivesynopsis">
    <xsl:text>## Directives&#10;&#10;</xsl:text>
    <xsl:for-each select="directivesynopsis">
      <xsl:sort select="name"/>
      <xsl:text>- [</xsl:text>
      <xsl:value-of select="name"/>
      <xsl:text>](</xsl:text>
      <xsl:if test="@location">
        <xsl:value-of select="concat(@location, '.md')"/>
      </xsl:if>
      <xsl:value-of select="concat('#', translate(name, $upper, $lower))"/>
      <xsl:text>)</xsl:text>
      <xsl:if test="@location">
        <xsl:value-of select="concat(' (', @location, ')')"/>
      </xsl:if>
      <xsl:value-of select="$nl"/>
    </xsl:for-each>
    <xsl:value-of select="$nl"/>
    <xsl:for-each select="directivesynopsis[not(@location)]">
      <xsl:sort select="name"/>
      <xsl:apply-templates select="."/>
    </xsl:for-each>
  </xsl:if>
</xsl:template>

<xsl:template match="section">
  <xsl:value-of select="substring('#####', 1, count(ancestor-or-self::section) + 1)"/>
  <xsl:text> </xsl:text>
  <xsl:apply-templates select="title/node()"/>
  <xsl:value-of select="concat($nl, $nl)"/>
  <xsl:apply-templates select="*[not(self::title)]"/>
</xsl:template>

<!-- ======================================================= directives -->

<xsl:template match="directivesynopsis">
  <xsl:value-of select="concat('## ', name, $nl, $nl)"/>
  <xsl:text>| | |&#10;|---|---|&#10;</xsl:text>
  <xsl:call-template name="row">
    <xsl:with-param name="label" select="'Description'"/>
    <xsl:with-param name="node" select="description"/>
  </xsl:call-template>
  <xsl:call-template name="row">
    <xsl:with-param name="label" select="'Syntax'"/>
    <xsl:with-param name="node" select="syntax"/>
    <xsl:with-param name="code" select="true()"/>
  </xsl:call-template>
  <xsl:choose>
    <xsl:when test="default">
      <xsl:call-template name="row">
        <xsl:with-param name="label" select="'Default'"/>
        <xsl:with-param name="node" select="default"/>
      </xsl:call-template>
    </xsl:when>
    <xsl:otherwise>
      <xsl:text>| Default | none |&#10;</xsl:text>
    </xsl:otherwise>
  </xsl:choose>
  <xsl:text>| Context | </xsl:text>
  <xsl:for-each select="contextlist/context">
    <xsl:if test="position() > 1">, </xsl:if>
    <xsl:value-of select="normalize-space(.)"/>
  </xsl:for-each>
  <xsl:text> |&#10;| Status | </xsl:text>
  <xsl:value-of select="normalize-space(/modulesynopsis/status)"/>
  <xsl:text> |&#10;| Module | </xsl:text>
  <xsl:choose>
    <xsl:when test="modulelist">
      <xsl:for-each select="modulelist/module">
        <xsl:if test="position() > 1">, </xsl:if>
        <xsl:apply-templates select="."/>
      </xsl:for-each>
    </xsl:when>
    <xsl:otherwise>
      <xsl:value-of select="normalize-space(/modulesynopsis/name)"/>
    </xsl:otherwise>
  </xsl:choose>
  <xsl:value-of select="concat(' |', $nl, $nl)"/>
  <xsl:apply-templates select="compatibility"/>
  <xsl:apply-templates select="usage/*"/>
  <xsl:call-template name="seealso"/>
</xsl:template>

<!-- One "| Label | value |" row; pipes in the value are escaped. -->
<xsl:template name="row">
  <xsl:param name="label"/>
  <xsl:param name="node"/>
  <xsl:param name="code" select="false()"/>
  <xsl:variable name="value">
    <xsl:choose>
      <xsl:when test="$code">
        <xsl:value-of select="concat('`', normalize-space($node), '`')"/>
      </xsl:when>
      <xsl:otherwise>
        <xsl:apply-templates select="$node/node()"/>
      </xsl:otherwise>
    </xsl:choose>
  </xsl:variable>
  <xsl:value-of select="concat('| ', $label, ' | ')"/>
  <xsl:call-template name="escape-pipes">
    <xsl:with-param name="text" select="normalize-space($value)"/>
  </xsl:call-template>
  <xsl:value-of select="concat(' |', $nl)"/>
</xsl:template>

<xsl:template name="escape-pipes">
  <xsl:param name="text"/>
  <xsl:choose>
    <xsl:when test="contains($text, '|')">
      <xsl:value-of select="concat(substring-before($text, '|'), '\|')"/>
      <xsl:call-template name="escape-pipes">
        <xsl:with-param name="text" select="substring-after($text, '|')"/>
      </xsl:call-template>
    </xsl:when>
    <xsl:otherwise>
      <xsl:value-of select="$text"/>
    </xsl:otherwise>
  </xsl:choose>
</xsl:template>

<!-- Paragraphs, or inline text alone: with paragraphs, text outside them
     is not rendered. -->
<xsl:template match="compatibility">
  <xsl:text>**Compatibility.** </xsl:text>
  <xsl:choose>
    <xsl:when test="p | ul">
      <xsl:apply-templates select="p[1]/node()"/>
      <xsl:value-of select="concat($nl, $nl)"/>
      <xsl:apply-templates select="p[position() > 1] | ul"/>
    </xsl:when>
    <xsl:otherwise>
      <xsl:apply-templates/>
      <xsl:value-of select="concat($nl, $nl)"/>
    </xsl:otherwise>
  </xsl:choose>
</xsl:template>

<xsl:template name="seealso">
  <xsl:if test="seealso">
    <xsl:text>See also:&#10;&#10;</xsl:text>
    <xsl:for-each select="seealso">
      <xsl:text>- </xsl:text>
      <xsl:apply-templates/>
      <xsl:value-of select="$nl"/>
    </xsl:for-each>
    <xsl:value-of select="$nl"/>
  </xsl:if>
</xsl:template>

<!-- =========================================================== blocks -->

<xsl:template match="p">
  <xsl:apply-templates/>
  <xsl:value-of select="concat($nl, $nl)"/>
</xsl:template>

<xsl:template match="ul">
  <xsl:for-each select="li">
    <xsl:text>- </xsl:text>
    <xsl:apply-templates/>
    <xsl:value-of select="$nl"/>
  </xsl:for-each>
  <xsl:value-of select="$nl"/>
</xsl:template>

<xsl:template match="note">
  <xsl:text>&gt; **</xsl:text>
  <xsl:choose>
    <xsl:when test="title"><xsl:apply-templates select="title/node()"/></xsl:when>
    <xsl:when test="@type = 'warning'">Warning</xsl:when>
    <xsl:otherwise>Note</xsl:otherwise>
  </xsl:choose>
  <xsl:text>**&#10;&gt;&#10;</xsl:text>
  <xsl:for-each select="*[not(self::title)]">
    <xsl:if test="position() > 1">&gt;&#10;</xsl:if>
    <xsl:text>&gt; </xsl:text>
    <xsl:choose>
      <xsl:when test="self::p"><xsl:apply-templates/></xsl:when>
      <xsl:otherwise><xsl:value-of select="normalize-space(.)"/></xsl:otherwise>
    </xsl:choose>
    <xsl:value-of select="$nl"/>
  </xsl:for-each>
  <xsl:value-of select="$nl"/>
</xsl:template>

<xsl:template match="example">
  <xsl:if test="title">
    <xsl:text>*</xsl:text>
    <xsl:apply-templates select="title/node()"/>
    <xsl:text>*&#10;&#10;</xsl:text>
  </xsl:if>
  <xsl:text>```apache&#10;</xsl:text>
  <xsl:call-template name="trim-newlines">
    <xsl:with-param name="text" select="string(highlight)"/>
  </xsl:call-template>
  <xsl:text>&#10;```&#10;&#10;</xsl:text>
</xsl:template>

<xsl:template name="trim-newlines">
  <xsl:param name="text"/>
  <xsl:choose>
    <xsl:when test="starts-with($text, $nl)">
      <xsl:call-template name="trim-newlines">
        <xsl:with-param name="text" select="substring($text, 2)"/>
      </xsl:call-template>
    </xsl:when>
    <xsl:when test="substring($text, string-length($text)) = $nl">
      <xsl:call-template name="trim-newlines">
        <xsl:with-param name="text"
                        select="substring($text, 1, string-length($text) - 1)"/>
      </xsl:call-template>
    </xsl:when>
    <xsl:otherwise>
      <xsl:value-of select="$text"/>
    </xsl:otherwise>
  </xsl:choose>
</xsl:template>

<!-- ========================================================== inlines -->

<!-- Runs of white space become one space; a space at either end stays
     only where an inline element sits on that side. -->
<xsl:template match="text()">
  <xsl:variable name="ws" select="' &#9;&#10;&#13;'"/>
  <xsl:variable name="text" select="normalize-space(.)"/>
  <xsl:choose>
    <xsl:when test="$text = ''">
      <xsl:if test="preceding-sibling::node() and following-sibling::node()">
        <xsl:text> </xsl:text>
      </xsl:if>
    </xsl:when>
    <xsl:otherwise>
      <xsl:if test="preceding-sibling::node()
                    and translate(substring(., 1, 1), $ws, '') = ''">
        <xsl:text> </xsl:text>
      </xsl:if>
      <xsl:value-of select="$text"/>
      <xsl:if test="following-sibling::node()
                    and translate(substring(., string-length(.)), $ws, '') = ''">
        <xsl:text> </xsl:text>
      </xsl:if>
    </xsl:otherwise>
  </xsl:choose>
</xsl:template>

<xsl:template match="code">
  <xsl:value-of select="concat('`', normalize-space(.), '`')"/>
</xsl:template>

<xsl:template match="var">
  <xsl:value-of select="concat('*', normalize-space(.), '*')"/>
</xsl:template>

<xsl:template match="em">
  <xsl:text>*</xsl:text>
  <xsl:apply-templates/>
  <xsl:text>*</xsl:text>
</xsl:template>

<xsl:template match="strong">
  <xsl:text>**</xsl:text>
  <xsl:apply-templates/>
  <xsl:text>**</xsl:text>
</xsl:template>

<xsl:template match="a">
  <xsl:text>[</xsl:text>
  <xsl:apply-templates/>
  <xsl:value-of select="concat('](', @href, ')')"/>
</xsl:template>

<xsl:template match="directive">
  <xsl:variable name="name" select="normalize-space(.)"/>
  <xsl:variable name="anchor" select="translate($name, $upper, $lower)"/>
  <xsl:choose>
    <xsl:when test="not(@module)">
      <xsl:value-of select="concat('`', $name, '`')"/>
    </xsl:when>
    <xsl:when test="contains($local, concat(' ', @module, ' '))">
      <xsl:value-of select="concat('[', $name, '](', @module, '.md#',
                                   $anchor, ')')"/>
    </xsl:when>
    <xsl:otherwise>
      <xsl:value-of select="concat('[', $name, '](', $httpd, @module,
                                   '.html#', $anchor, ')')"/>
    </xsl:otherwise>
  </xsl:choose>
</xsl:template>

<xsl:template match="module">
  <xsl:variable name="name" select="normalize-space(.)"/>
  <xsl:choose>
    <xsl:when test="contains($local, concat(' ', $name, ' '))">
      <xsl:value-of select="concat('[', $name, '](', $name, '.md)')"/>
    </xsl:when>
    <xsl:otherwise>
      <xsl:value-of select="concat('[', $name, '](', $httpd, $name,
                                   '.html)')"/>
    </xsl:otherwise>
  </xsl:choose>
</xsl:template>

</xsl:stylesheet>
